"""Files on disk, safely: opens that follow no link, atomic replacement, bounded JSON, named write errors."""
