"""The contract suite: behaviour tests of the public frontier API, each run on both backends."""
