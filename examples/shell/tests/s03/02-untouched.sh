#!/usr/bin/env bash
set -eu
[ "$(wc -l < log.txt)" -eq 4 ]
