#!/usr/bin/env bash
# The image's entrypoint: runs `mirrorline ARGS...`, with the config taken from the environment
# when asked to. Without MIRRORLINE_* variables the arguments pass through unchanged.
#
#   MIRRORLINE_CONFIG=FILE     for standalone, distributed and mm2: FILE is inserted as the
#                              command's config-file argument (the worker config; mm2.properties)
#   MIRRORLINE_WORKER_<KEY>=V  for standalone and distributed: the worker property <key>=V,
#                              <KEY> lower-cased with "_" -> ".", "__" -> "_", "___" -> "-"
#                              (MIRRORLINE_WORKER_BOOTSTRAP_SERVERS -> bootstrap.servers). They are
#                              appended, in name order, to a copy of MIRRORLINE_CONFIG (a
#                              .properties file, if set) in $MIRRORLINE_RUN_DIR/worker.properties,
#                              which becomes the worker config; later keys win, so they override it
#   MIRRORLINE_LOG_LEVEL=L     adds --log-level L
#   MIRRORLINE_RUN_DIR=DIR     where the generated file goes (default ${TMPDIR:-/tmp}/mirrorline)
#
# `entrypoint.sh --print-config ARGS...` prints the command it would run (as a comment) and the
# generated worker properties, secrets included, and exits without starting anything.
set -euo pipefail

die() { echo "mirrorline-entrypoint: error: $*" >&2; exit 1; }

print_only=false
if [ "${1:-}" = "--print-config" ]; then
  print_only=true
  shift
fi

# Global options come before the command: mirrorline [--log-level L] COMMAND ...
globals=()
if [ -n "${MIRRORLINE_LOG_LEVEL:-}" ]; then
  globals+=(--log-level "$MIRRORLINE_LOG_LEVEL")
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --log-level) [ $# -ge 2 ] || die "--log-level needs a value"; globals+=("$1" "$2"); shift 2 ;;
    -*) globals+=("$1"); shift ;;
    *) break ;;
  esac
done
command=${1:-}
[ $# -gt 0 ] && shift

# Java properties escaping of a value: backslashes, line breaks, leading blanks.
escape_value() {
  local value=$1
  value=${value//\\/\\\\}
  value=${value//$'\n'/\\n}
  value=${value//$'\r'/\\r}
  case "$value" in [[:blank:]]*) value="\\$value" ;; esac
  printf '%s' "$value"
}

worker_vars=()
while IFS= read -r name; do
  [ -n "$name" ] && worker_vars+=("$name")
done < <(compgen -e | grep '^MIRRORLINE_WORKER_' | LC_ALL=C sort || true)

config_args=()
generated=""
case "$command" in
  standalone|distributed)
    if [ ${#worker_vars[@]} -gt 0 ]; then
      base=${MIRRORLINE_CONFIG:-}
      if [ -n "$base" ]; then
        [ -r "$base" ] || die "MIRRORLINE_CONFIG=$base is not a readable file"
        case "${base,,}" in
          *.yaml|*.yml|*.json) die "MIRRORLINE_WORKER_* variables extend a .properties file; MIRRORLINE_CONFIG=$base is not one" ;;
        esac
      fi
      run_dir=${MIRRORLINE_RUN_DIR:-${TMPDIR:-/tmp}/mirrorline}
      umask 077  # the properties may hold credentials
      mkdir -p "$run_dir" || die "cannot create MIRRORLINE_RUN_DIR=$run_dir; mount a writable directory there"
      generated="$run_dir/worker.properties"
      {
        if [ -n "$base" ]; then
          echo "# from MIRRORLINE_CONFIG=$base"
          cat "$base"
          echo
        fi
        echo "# from MIRRORLINE_WORKER_* environment variables"
        for name in "${worker_vars[@]}"; do
          key=${name#MIRRORLINE_WORKER_}
          [ -n "$key" ] || die "MIRRORLINE_WORKER_ names no property"
          key=${key,,}
          key=${key//___/-}
          key=${key//__/%}
          key=${key//_/.}
          key=${key//%/_}
          printf '%s=%s\n' "$key" "$(escape_value "${!name}")"
        done
      } >"$generated" || die "cannot write $generated; mount a writable directory at MIRRORLINE_RUN_DIR"
      config_args=("$generated")
    elif [ -n "${MIRRORLINE_CONFIG:-}" ]; then
      config_args=("$MIRRORLINE_CONFIG")
    fi
    ;;
  mm2)
    [ ${#worker_vars[@]} -eq 0 ] || die "MIRRORLINE_WORKER_* apply to standalone and distributed; mm2 takes its worker settings from mm2.properties (e.g. B.offset.flush.interval.ms)"
    if [ -n "${MIRRORLINE_CONFIG:-}" ]; then
      config_args=("$MIRRORLINE_CONFIG")
    fi
    ;;
esac

args=("${globals[@]}")
[ -n "$command" ] && args+=("$command")
args+=("${config_args[@]}" "$@")

if $print_only; then
  echo "# mirrorline ${args[*]}"
  if [ -n "$generated" ]; then
    cat "$generated"
  fi
  exit 0
fi
exec mirrorline "${args[@]}"
