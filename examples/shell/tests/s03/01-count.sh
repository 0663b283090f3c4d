#!/usr/bin/env bash
set -eu
[ "$(tr -d "[:space:]" < count.txt)" = "4" ]
