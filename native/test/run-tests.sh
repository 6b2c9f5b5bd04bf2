#!/usr/bin/env bash
# Runs each C test binary given as an argument; prints one line per test and fails when any does.
# Tests find the build through $VC_BUILD (libvcuda.so, fake/, test/) and fixtures through $VC_NATIVE.
set -u
failed=0
for t in "$@"; do
  start=$(date +%s%N)
  if out=$("$t" 2>&1); then
    printf 'ok   %-40s %5d ms\n' "$(basename "$t")" $(( ($(date +%s%N) - start) / 1000000 ))
  else
    failed=1
    printf 'FAIL %s\n%s\n' "$(basename "$t")" "$out"
  fi
done
exit $failed
