"""``headwater demo``: the factory lands data, a medallion pipeline runs on it, and the
results are checked against what the factory landed."""
