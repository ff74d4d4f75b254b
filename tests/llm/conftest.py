from tests.seeding import seed  # noqa: F401  (autouse: every draw seeded, the seed printed on failure)
