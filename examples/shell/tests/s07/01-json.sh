#!/usr/bin/env bash
set -eu
python3 -c 'import json; json.load(open("config.json"))'
