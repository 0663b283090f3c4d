#!/usr/bin/env bash
set -eu
test -f hello.txt
