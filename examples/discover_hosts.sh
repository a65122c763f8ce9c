#!/usr/bin/env bash
# Host discovery script for horovodrun --host-discovery-script: prints the
# hosts file, one "host[:slots]" per line, so a running job's membership
# changes as soon as that file is edited.
#
# The file is $HOSTS_FILE if set, else hosts.txt in the current directory
# (the directory horovodrun was started in). Replace it atomically (write a
# temporary file, then mv) so this script never reads half an edit.
# A missing file is an error: the daemon then keeps the last good host set.
set -euo pipefail

hosts_file="${HOSTS_FILE:-hosts.txt}"
if [[ ! -r "$hosts_file" ]]; then
  echo "discover_hosts.sh: cannot read hosts file '$hosts_file' (set HOSTS_FILE)" >&2
  exit 1
fi
cat -- "$hosts_file"
