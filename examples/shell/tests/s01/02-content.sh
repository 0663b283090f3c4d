#!/usr/bin/env bash
set -eu
[ "$(cat hello.txt)" = "hello world" ]
