"""Campaigns: one search (or one scored solution file) per problem of a suite, and their scores.

`problems` finds and loads the problems, `scaling` gives big problem files small interpreter
shapes, `runner` starts and resumes campaigns, `scoring` computes pass rate and fast_p.
"""
