#!/usr/bin/env bash
set -eu
[ "$(tr -d "[:space:]" < sum.txt)" = "60" ]
