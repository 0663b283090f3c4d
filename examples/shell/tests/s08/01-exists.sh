#!/usr/bin/env bash
set -eu
test -f reversed.txt
