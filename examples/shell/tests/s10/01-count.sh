#!/usr/bin/env bash
set -eu
[ "$(tr -d "[:space:]" < words.txt)" = "7" ]
