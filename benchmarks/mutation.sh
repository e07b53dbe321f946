#!/usr/bin/env bash
# Mutation testing of the code that decides numbers and verdicts: how many planted faults the fast
# unit tests notice. A benchmark of the suite's strength, not a CI step (it takes 10-40 minutes).
#
#   bash benchmarks/mutation.sh                 (from the repository root; needs mutmut 3:
#                                                pip install mutmut==3.8.1)
#   PYTHON=/path/to/python  MUTATION_DIR=/tmp/mut  MUTATION_JOBS=2  bash benchmarks/mutation.sh
#   MUTATION_DIR=/tmp/mut bash benchmarks/mutation.sh --survivors
#       (after adding tests: re-copies the checkout's tests and unmutated code into that earlier
#        run's folder and re-tests only the mutants it left alive; killed ones stay killed, since
#        adding tests cannot revive a mutant. The 7 mutated modules must be unchanged since.)
#
# What it does: copies the checkout's tracked and untracked-but-not-ignored files into
# $MUTATION_DIR (default: a fresh temp folder; mutmut writes its mutants/ tree there, never into
# the checkout), writes mutmut's [mutmut] section into that copy's setup.cfg, runs mutmut on the
# functions listed in SCOPE below with only the fast unit tests in TESTS as its test command, and
# prints the killed share per module (benchmarks/mutation_score.py; also written to
# $MUTATION_DIR/score.txt). "killed" counts mutants a test failed on or that timed out; mutants no
# selected test reaches count as survivors.
#
# Scope: statistics (harness/data/results.py sample_stats, harness/analysis/stats.py),
# plausibility and ceilings (harness/analysis/plausibility.py, ceilings.with_bounds/_best_of),
# diff (harness/analysis/diff.py), device-time attribution (devicetime.attribute/diagnose) and the
# verdict tables (harness/report/tables.py: significance, peak fractions; the crossover, fastest
# and ratios views under harness/report/views/: crossover, flat time, fastest cell, ratios).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
WORK=${MUTATION_DIR:-$(mktemp -d -t harness-mutation-XXXXXX)}
JOBS=${MUTATION_JOBS:-2}

SOURCES="harness/data/results.py harness/analysis/stats.py harness/analysis/plausibility.py
harness/measure/ceilings.py harness/analysis/diff.py harness/measure/devicetime.py
harness/report/tables.py harness/report/views/crossover.py harness/report/views/fastest.py
harness/report/views/ratios.py"
# mutmut mutant-name patterns (module.x_function__mutmut_N): whole modules, or the named functions.
SCOPE="harness.data.results.x_sample_stats*
harness.analysis.stats.*
harness.analysis.plausibility.*
harness.measure.ceilings.x_with_bounds*
harness.measure.ceilings.x__best_of*
harness.analysis.diff.x_average_ranks*
harness.analysis.diff.x_mann_whitney_u*
harness.analysis.diff.x_verdict_for*
harness.analysis.diff.x__worst*
harness.analysis.diff.x_load_cases*
harness.analysis.diff.x_compare_case*
harness.analysis.diff.x__status_verdict*
harness.analysis.diff.x__case_dict*
harness.analysis.diff.x_diff_runs*
harness.analysis.diff.x__comparable_params*
harness.analysis.diff.x__text*
harness.analysis.diff.x__cell_facts*
harness.analysis.diff.x_environment_mismatches*
harness.analysis.diff.xǁRunDiffǁ*
harness.measure.devicetime.x_attribute*
harness.measure.devicetime.x_diagnose*
harness.report.tables.x_iqrs_overlap*
harness.report.tables.x_gap_significance*
harness.report.tables.x_peak_fractions*
harness.report.tables.x_flop_ceiling*
harness.report.tables.x_ceiling_for*
harness.report.views.crossover.x_find_crossover*
harness.report.views.crossover.xǁCrossoverǁ*
harness.report.views.crossover.x_crossovers*
harness.report.views.crossover.x__pair*
harness.report.views.crossover.x_flat_time_below_crossover*
harness.report.views.crossover.x__flat_run*
harness.report.views.fastest.x_fastest_by_size*
harness.report.views.ratios.x_ratio_table*
harness.report.views.ratios.x__gpu_speedups*"
# The fast unit tests that cover those functions: no framework workers, no report rendering
# (a report test runs every table function for a second or more; per mutant that adds up to
# hours). The list is the same before and after tests are added: mutmut re-tests everything
# when its test selection changes.
TESTS="tests/test_stats.py tests/test_diff.py tests/test_devicetime.py tests/test_bounds.py
tests/test_verdicts.py
tests/test_report.py::test_crossover_where_gpu_overtakes
tests/test_report.py::test_no_crossover_in_range
tests/test_report.py::test_gpu_faster_everywhere_and_lead_lost_again
tests/test_report.py::test_crossover_from_synthetic_measurements
tests/test_report.py::test_iqr_overlap_decides_significance
tests/test_report.py::test_fastest_cell_and_noise
tests/test_report.py::test_noisy_gap_is_not_significant
tests/test_report.py::test_invalid_time_is_not_a_result
tests/test_report.py::test_copies_on_the_gpu_are_judged_against_the_best_cpu_way"

# A copy of the checkout as git sees it (tracked + new files), without ignored build outputs.
copy_checkout() { (cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar cf -); }
mkdir -p "$WORK"
copy_checkout | (cd "$WORK" && tar xf -)
cd "$WORK"
# conftest.py points frameworks' home-folder writes at temp folders; keep workers quiet too.
export MPLBACKEND=Agg TF_CPP_MIN_LOG_LEVEL=3
patterns=()
while IFS= read -r pattern; do patterns+=("$pattern"); done <<< "$SCOPE"
if [ "${1:-}" = "--survivors" ]; then
  [ -f mutmut-results.txt ] || { echo "no earlier run in $WORK"; exit 2; }
  # mutmut never overwrites files in mutants/: bring the new tests and unmutated code in.
  excludes=()
  for file in $SOURCES; do excludes+=("--exclude=$file"); done
  copy_checkout | (cd mutants && tar xf - "${excludes[@]}")
  for file in $SOURCES; do
    cmp -s "$ROOT/$file" "$file" || echo "warning: $file changed since the first run"
  done
  [ -f mutmut-results-first.txt ] || cp mutmut-results.txt mutmut-results-first.txt
  mapfile -t survivors < <("$PYTHON" "$ROOT/benchmarks/mutation_score.py" --names \
    mutmut-results.txt "${patterns[@]}")
  echo "re-testing ${#survivors[@]} surviving mutants"
  run_names=("${survivors[@]}")
else
  rm -rf mutants
  {
    echo "[mutmut]"
    echo "source_paths = harness"
    echo "only_mutate ="
    for file in $SOURCES; do echo "    $file"; done
    echo "also_copy ="
    echo "    backends"
    echo "    workloads"
    echo "pytest_add_cli_args_test_selection ="
    for file in $TESTS; do echo "    $file"; done
    echo "    -m"
    echo "    not slow"
    echo "    -p"
    echo "    no:cacheprovider"
  } > setup.cfg
  # The same test selection before and after tests are added (mutmut re-tests everything when
  # it changes): a test file the checkout does not have yet is an empty one.
  for file in $TESTS; do
    case "$file" in *::*) ;; *) [ -f "$file" ] || : > "$file" ;; esac
  done
  run_names=("${patterns[@]}")
fi
started=$(date +%s)
"$PYTHON" -m mutmut run --max-children "$JOBS" "${run_names[@]}" > mutmut-run.log 2>&1 || {
  echo "mutmut failed; the end of $WORK/mutmut-run.log:"; tail -30 mutmut-run.log; exit 1; }
echo "mutmut ran $(( $(date +%s) - started )) s in $WORK"
"$PYTHON" -m mutmut results --all true > mutmut-results.txt
"$PYTHON" "$ROOT/benchmarks/mutation_score.py" mutmut-results.txt "${patterns[@]}" | tee score.txt
