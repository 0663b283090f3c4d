#!/usr/bin/env bash
set -eu
[ "$(wc -l < sorted.txt)" -eq 3 ]
