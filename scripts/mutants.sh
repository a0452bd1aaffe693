#!/usr/bin/env bash
# Mutation smoke test: applies each named mutation of tests/mutants/mutants.list (a patch
# tests/mutants/<name>.patch), rebuilds the targets the list names, runs the tests the list
# names (a ctest -R regex), reverts, and prints a table: killed (a test failed) or SURVIVED.
# Every listed mutation must be killed; the exit status is 1 otherwise. Not part of CI (on 2
# cores it takes tens of minutes); run it before a change to the numerics lands.
#
#   bash scripts/mutants.sh [NAME...]     (default: every mutation of the list)
#
# Environment: AMPC_BUILD_DIR (default build; must be configured and built), AMPC_JOBS
# (default 2), AMPC_MUTANTS_LOG (default /tmp/ampc-mutants: one build/test log per mutation).
# The patch is reverted on every exit (trap), also on Ctrl-C; the touched targets are
# rebuilt unmutated at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${AMPC_BUILD_DIR:-build}
jobs=${AMPC_JOBS:-2}
logs=${AMPC_MUTANTS_LOG:-/tmp/ampc-mutants}
list=tests/mutants/mutants.list
mkdir -p "$logs"
[[ -f $build/build.ninja ]] || { echo "mutants.sh: $build is not a configured build" >&2; exit 2; }

applied=""
revert() {
  if [[ -n $applied ]]; then
    git apply -R "$applied" || echo "mutants.sh: could not revert $applied: revert it by hand" >&2
    applied=""
  fi
}
trap revert EXIT
trap 'exit 130' INT TERM

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; echo "${s%"${s##*[![:space:]]}"}"; }

declare -a names targets_of regex_of what_of
while IFS=';' read -r name targets regex what; do
  name=$(trim "$name")
  [[ -z $name || $name == \#* ]] && continue
  if [[ $# -gt 0 ]]; then
    wanted=0
    for n in "$@"; do [[ $n == "$name" ]] && wanted=1; done
    [[ $wanted == 1 ]] || continue
  fi
  names+=("$name")
  targets_of+=("$(trim "$targets")")
  regex_of+=("$(trim "$regex")")
  what_of+=("$(trim "$what")")
done <"$list"
[[ ${#names[@]} -gt 0 ]] || { echo "mutants.sh: no mutation selected" >&2; exit 2; }

start=$(date +%s)
killed=0
rows=()
all_targets=()
for i in "${!names[@]}"; do
  name=${names[$i]}
  patch=tests/mutants/$name.patch
  log=$logs/$name.log
  t0=$(date +%s)
  read -r -a targets <<<"${targets_of[$i]}"
  all_targets+=("${targets[@]}")
  result="" by=""
  if ! git apply --check "$patch" 2>"$log"; then
    result="PATCH DOES NOT APPLY"
  else
    git apply "$patch" && applied=$patch
    echo "== $name: building ${targets[*]}" >&2
    if ! nice ninja -C "$build" -j "$jobs" "${targets[@]}" >>"$log" 2>&1; then
      result="BUILD FAILED"
    else
      echo "== $name: ctest -R '${regex_of[$i]}'" >&2
      if nice ctest --test-dir "$build" -R "${regex_of[$i]}" --no-tests=error -j "$jobs" \
        --output-on-failure >>"$log" 2>&1; then
        result="SURVIVED"
      else
        # The failing tests, from ctest's summary ("  12 - Suite.Case (Failed)", a
        # parameterised case with "  # GetParam() = ..." before the status).
        by=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) .*(.*)$/\1/p' "$log" | head -3 | paste -sd, -)
        if [[ -z $by ]]; then
          result="TESTS DID NOT RUN"
        else
          result="killed"
          killed=$((killed + 1))
        fi
      fi
    fi
    revert
  fi
  rows+=("| $name | $result | ${by:--} | $(($(date +%s) - t0)) s |")
  echo "== $name: $result (${by:--})" >&2
done

echo "== rebuilding the touched targets unmutated" >&2
mapfile -t uniq < <(printf '%s\n' "${all_targets[@]}" | sort -u)
nice ninja -C "$build" -j "$jobs" "${uniq[@]}" >"$logs/rebuild.log" 2>&1 ||
  echo "mutants.sh: the unmutated rebuild failed, see $logs/rebuild.log" >&2

total=$(($(date +%s) - start))
echo
echo "| mutation | result | killed by (first failing tests) | time |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "$killed of ${#names[@]} mutations killed; total time $((total / 60)) min $((total % 60)) s" \
  "(logs: $logs)"
[[ $killed == "${#names[@]}" ]]
