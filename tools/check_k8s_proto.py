#!/usr/bin/env python3
"""Checks that every message of a project .proto (agent/kube/k8s.proto) matches
upstream's generated.proto of the pinned k8s.io modules: same field names,
numbers, labels and types, and every upstream field present unless the message
is marked "(subset)" (a decoded object is re-encoded on update: a field we do
not know would be dropped from it).

  check_k8s_proto.py PROJECT_PROTO [MODCACHE_DIR]

The versions are those that tools/testenv/k8s/go.mod pins (k8s.io/api,
k8s.io/apimachinery). Without MODCACHE_DIR each module is fetched (or found in
Go's module cache) with `go mod download`, by the Go that
tools/testenv/k8s-build.sh builds the control plane with: a fresh machine has
no module cache until something downloads into it."""
import json
import os
import re
import subprocess
import sys

FIELD = re.compile(r'^\s*(optional|repeated|required)?\s*(map<\s*\w+\s*,\s*[\w.]+\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;')


def messages(text):
    """{name: (marker, {field: (label, type, number)})} of top-level messages."""
    out, cur, marker, depth = {}, None, None, 0
    for line in text.splitlines():
        m = re.match(r'^//\s*upstream:\s*(\S+)(\s*\(subset\))?', line)
        if m:
            marker = (m.group(1), bool(m.group(2)))
            continue
        m = re.match(r'^message\s+(\w+)\s*\{', line)
        if m and depth == 0:
            cur = m.group(1)
            out[cur] = (marker, {})
            marker, depth = None, 1
            continue
        if cur is None:
            continue
        depth += line.count('{') - line.count('}')
        if depth <= 0:
            cur, depth = None, 0
            continue
        m = FIELD.match(line)
        if m and depth == 1:
            typ = re.sub(r'\s+', '', m.group(2))
            if typ.startswith('map<'):
                typ = 'map<' + ','.join(t.split('.')[-1] for t in typ[4:-1].split(',')) + '>'
            else:
                typ = typ.split('.')[-1]
            out[cur][1][m.group(3)] = (m.group(1) or '', typ, int(m.group(4)))
    return out


def pinned(gomod, module):
    for line in open(gomod):
        m = re.match(r'^\s*(?:replace\s+)?' + re.escape(module) + r'\s+=>\s+\S+\s+(v\S+)', line) \
            or re.match(r'^\s*' + re.escape(module) + r'\s+(v\S+)', line)
        if m:
            return m.group(1)
    sys.exit(f'check_k8s_proto: {gomod}: no version for {module}')


def module_dir(root, module, version):
    k8s = os.path.join(root, 'tools/testenv/k8s')
    go = subprocess.run([os.path.join(root, 'tools/testenv/k8s-build.sh'), 'go'],
                        capture_output=True, text=True)
    if go.returncode != 0:
        sys.exit(f'check_k8s_proto: no Go to read upstream with: {go.stderr.strip()}')
    env = dict(os.environ, GOTOOLCHAIN='local', GOFLAGS='-mod=mod', GOSUMDB='off')
    r = subprocess.run([go.stdout.strip(), 'mod', 'download', '-json', f'{module}@{version}'],
                       cwd=k8s, env=env, capture_output=True, text=True)
    try:
        info = json.loads(r.stdout)
    except ValueError:
        info = {}
    if r.returncode != 0 or 'Dir' not in info:
        sys.exit(f'check_k8s_proto: go mod download {module}@{version}: '
                 f'{info.get("Error") or r.stderr.strip()}')
    return info['Dir']


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    proto = sys.argv[1]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    cache = sys.argv[2] if len(sys.argv) > 2 else None
    gomod = os.path.join(root, 'tools/testenv/k8s/go.mod')
    ours = messages(open(proto).read())
    errors, seen, dirs = [], {}, {}
    for name, (marker, fields) in ours.items():
        if not marker:
            errors.append(f'{proto}: message {name}: no "// upstream: FILE" line before it')
            continue
        path, subset = marker
        module = '/'.join(path.split('/')[:2])
        version = pinned(gomod, module)
        if cache:
            mod_dir = os.path.join(cache, f'{module}@{version}')
        else:
            mod_dir = dirs.get(module) or module_dir(root, module, version)
            dirs[module] = mod_dir
        up_file = os.path.join(mod_dir, *path.split('/')[2:])
        if up_file not in seen:
            try:
                seen[up_file] = messages(open(up_file).read())
            except OSError as e:
                sys.exit(f'check_k8s_proto: {e}')
        up = seen[up_file].get(name)
        if up is None:
            errors.append(f'message {name}: not in {up_file}')
            continue
        for f, spec in fields.items():
            if f not in up[1]:
                errors.append(f'{name}.{f}: no such field upstream')
            elif up[1][f] != spec:
                errors.append(f'{name}.{f}: {spec} here, {up[1][f]} upstream')
        if not subset:
            for f in up[1]:
                if f not in fields:
                    errors.append(f'{name}.{f}: upstream field missing (or mark the message "(subset)")')
    for e in errors:
        print('check_k8s_proto: ' + e, file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f'check_k8s_proto: {len(ours)} messages match upstream')


main()
