#!/usr/bin/env bash
# The include rules of docs/ARCHITECTURE.md's layer table, checked: every
# `#include "DIR/..."` in a layer's folder names one of the layers it may use.
# Fails, naming each include that breaks a rule.
#   test/layers.sh [ROOT]     check the tree at ROOT (default: this checkout)
#   test/layers.sh --self-test  show that a tree breaking a rule fails and one
#                               keeping them passes
set -euo pipefail

# Each layer and what it may include, lowest first. agent/ is its top-level
# files only: agent/model/ and agent/kube/ are layers of their own below
# sources/ and managers/, inside agent/'s folder because the top level is fixed.
layers=(reactor cri agent/model agent/kube sources managers agent)
declare -A allow=(
  [reactor]="reactor"
  [cri]="reactor cri"
  [agent/model]="reactor agent/model"
  [agent/kube]="reactor agent/kube"
  [sources]="reactor agent/model agent/kube sources"
  [managers]="reactor cri agent/model agent/kube managers"
  [agent]="reactor cri agent/model agent/kube sources managers agent"
)

# The layer an include path names, or nothing for a file beside the includer
# (generated headers, a module's own internal header).
layer_of() {
  case $1 in
  agent/model/*) echo agent/model ;;
  agent/kube/*) echo agent/kube ;;
  reactor/* | cri/* | sources/* | managers/* | agent/*) echo "${1%%/*}" ;;
  esac
}

check() {
  local root=$1 bad=0 n=0 layer f line inc to
  for layer in "${layers[@]}"; do
    local files=()
    if [ "$layer" = agent ]; then
      files=("$root"/agent/*.[ch])
    else
      mapfile -t files < <(find "$root/$layer" -name '*.[ch]' | sort)
    fi
    for f in "${files[@]}"; do
      [ -e "$f" ] || continue
      while IFS= read -r line; do
        inc=${line#*\"}
        inc=${inc%%\"*}
        to=$(layer_of "$inc")
        [ -n "$to" ] || continue
        n=$((n + 1))
        case " ${allow[$layer]} " in
        *" $to "*) ;;
        *)
          echo "layers: ${f#"$root"/}: includes \"$inc\": $layer/ may include only ${allow[$layer]}"
          bad=1
          ;;
        esac
      done < <(grep -hE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
    done
  done
  [ "$n" -gt 0 ] || { echo "layers: no include found under $root"; return 1; }
  [ $bad = 0 ] && echo "layers: $n includes across ${#layers[@]} layers keep the rules"
  return $bad
}

self_test() {
  local t
  t=$(mktemp -d)
  trap 'rm -rf "$t"' RETURN
  mkdir -p "$t"/{reactor,cri,agent/model,agent/kube,sources,managers}
  printf '#include "reactor/buf.h"\n' >"$t/agent/kube/client.c"
  printf '#include "agent/kube/client.h"\n#include "cri/conn.h"\n' >"$t/managers/node.c"
  printf '#include "managers/node.h"\n' >"$t/agent/main.c"
  check "$t" >/dev/null || { echo "layers self-test: a tree that keeps the rules failed"; return 1; }
  for bad in 'agent/kube/client.c:#include "agent/model/pod.h"' \
    'reactor/buf.c:#include "cri/conn.h"' 'sources/file.c:#include "managers/pleg.h"' \
    'agent/model/pod.c:#include "agent/kubelet.h"' 'cri/conn.c:  # include "agent/kube/h2.h"'; do
    cp -r "$t" "$t.bad"
    printf '%s\n' "${bad#*:}" >"$t.bad/${bad%%:*}"
    if check "$t.bad" >/dev/null; then
      echo "layers self-test: ${bad%%:*} with ${bad#*:} passed"
      rm -rf "$t.bad"
      return 1
    fi
    rm -rf "$t.bad"
  done
  echo "layers self-test: a kept tree passes, 5 broken ones fail"
}

if [ "${1:-}" = --self-test ]; then
  self_test
else
  check "${1:-$(cd "$(dirname "$0")/.." && pwd)}"
fi
