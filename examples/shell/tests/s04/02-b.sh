#!/usr/bin/env bash
set -eu
test -d out/b
