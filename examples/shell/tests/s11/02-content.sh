#!/usr/bin/env bash
set -eu
[ "$(cat notes/todo.txt)" = "buy milk" ]
