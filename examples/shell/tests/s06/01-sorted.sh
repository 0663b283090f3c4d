#!/usr/bin/env bash
set -eu
sort names.txt | diff - sorted.txt
