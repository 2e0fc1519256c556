#!/bin/sh
# mkman.sh HELP VERSION SYSCONFDIR MANIFESTDIR OUT: nanolet(8) in troff from the text of `nanolet --help`,
# so that the manual lists exactly the flags the binary has.
set -eu
help=$1 version=$2 sysconfdir=$3 manifestdir=$4 out=$5
{
  printf '.TH NANOLET 8 "" "nanolet %s" "System Administration"\n' "$version"
  printf '.SH NAME\nnanolet \\- a Kubernetes node agent (kubelet) for edge nodes\n'
  printf '.SH SYNOPSIS\n.B nanolet\n[\\fIflags\\fR]\n.br\n'
  printf '.B nanolet cri\n\\fICOMMAND\\fR ...\n.br\n.B nanolet manifest check\n\\fIFILE\\fR...\n.br\n.B nanolet shutdown-hook\n[\\fIflags\\fR]\n'
  printf '.SH DESCRIPTION\n'
  sed -n '1p' "$help" | sed 's/\\/\\\\/g'
  printf '.PP\nSettings come from the upstream kubelet'"'"'s KubeletConfiguration file given\n'
  printf 'with \\fB\\-\\-config\\fR, then the drop-ins (\\fI*.conf\\fR, in lexical order) of\n'
  printf '\\fB\\-\\-config\\-dir\\fR, which override it: maps key by key, lists whole.\n'
  printf 'Flags override both.\n'
  printf '.SH OPTIONS\n'
  # "  -v, --v int32     Log verbosity": the flag in bold, its type in italics.
  # A type is one lowercase word (or []Word) followed by two spaces, or by one
  # when the flag and type fill the column.
  sed -n '/^Flags:/,$p' "$help" | sed '1d' | sed 's/\\/\\\\/g' | awk '{
    sub(/^ +/, "")
    flag = $1; rest = substr($0, length($1) + 2)
    if (flag ~ /,$/) { flag = flag " " $2; rest = substr(rest, length($2) + 2) }
    type = ""
    if (match(rest, /^(\[\][A-Z]|[a-z])[A-Za-z0-9]*(  +| [A-Z])/)) {
      split(rest, w, " "); type = w[1]; rest = substr(rest, length(type) + 1)
    }
    sub(/^ +/, "", rest)
    gsub(/-/, "\\-", flag)
    print ".TP"
    print "\\fB" flag "\\fR" (type == "" ? "" : " \\fI" type "\\fR")
    print rest
  }'
  printf '.SH FILES\n'
  printf '.TP\n%s/nanolet/config.yaml\nthe configuration file\n' "$sysconfdir"
  printf '.TP\n%s\nstatic pod manifests\n' "$manifestdir"
  printf '.TP\n/var/lib/kubelet\nthe root directory (\\fB\\-\\-root\\-dir\\fR): pods'"'"' volumes and state\n'
  printf '.TP\n/var/log/pods\ncontainer logs\n'
  printf '.SH SEE ALSO\ncontainerd(8)\n'
} >"$out"
