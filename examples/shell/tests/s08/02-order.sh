#!/usr/bin/env bash
set -eu
tac poem.txt | diff - reversed.txt
