#!/usr/bin/env bash
set -eu
python3 -I -c 'import json,sys; sys.exit(0 if json.load(open("config.json"))["debug"] is True else 1)'
