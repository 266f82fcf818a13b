"""Layer 1: what every other layer rests on (``errors``: the one exception tree under ``FrontierError``)."""
