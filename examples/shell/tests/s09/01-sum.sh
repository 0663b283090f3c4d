#!/usr/bin/env bash
set -eu
[ "$(tr -d "[:space:]" < total.txt)" = "-3" ]
