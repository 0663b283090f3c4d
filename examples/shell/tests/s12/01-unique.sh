#!/usr/bin/env bash
set -eu
[ "$(cat unique.txt)" = "$(printf "a\nb\nc")" ]
