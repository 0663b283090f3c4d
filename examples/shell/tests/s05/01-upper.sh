#!/usr/bin/env bash
set -eu
[ "$(cat upper.txt)" = "$(tr a-z A-Z < words.txt)" ]
