#!/usr/bin/env bash
set -eu
python3 -I -c 'import json; json.load(open("config.json"))'
