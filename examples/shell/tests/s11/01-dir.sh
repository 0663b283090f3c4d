#!/usr/bin/env bash
set -eu
test -d notes
