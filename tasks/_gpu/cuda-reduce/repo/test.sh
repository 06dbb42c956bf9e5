#!/bin/sh
# The GPU sum must equal a CPU sum of the same data.
exec ./reduce --check
