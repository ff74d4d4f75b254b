"""The records every part of the package shares, at the bottom of its imports: what an evaluation
yields and its failure classes (`result`), a run's nodes and their graph (`graph`), one model call
(`calls`). Modules here import nothing of the package but `kernelevolve.steps`; everything else
imports them. (Nothing is re-exported here: import from the module, which keeps imports light.)
"""
