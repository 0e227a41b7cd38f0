#!/usr/bin/env bash
# Reserve hugepages for a Stria appliance running the `spdk` backend, mount
# hugetlbfs for them, and report what the kernel actually granted.
#
#   reserve.sh [--size 2M|1G] [--count N | --mem SIZE | --config MAP.yaml]
#              [--node N] [--mount DIR] [--dry-run]
#
# See hugepages/README.md. Exit status: 0 when at least the requested number
# of pages is reserved (or, with --dry-run, when the request is valid), 1 when
# the kernel granted fewer or something went wrong, 2 on a usage error.
set -euo pipefail

prog=reserve.sh
default_mem=1GiB

usage() {
	cat <<'EOF'
usage: reserve.sh [--size 2M|1G] [--count N | --mem SIZE | --config MAP.yaml]
                  [--node N] [--mount DIR] [--dry-run]

  --size 2M|1G     hugepage size (default 2M)
  --count N        reserve N pages
  --mem SIZE       reserve enough pages for SIZE (4096, 512MiB, 4GiB, 3GB, ...)
  --config MAP     reserve enough pages for `spdk: { mem-size: ... }` of a
                   Stria device map (1GiB when the key is absent; nothing
                   when the map says `spdk: { hugepages: false }`)
  --node N         reserve on NUMA node N only (default: let the kernel spread)
  --mount DIR      hugetlbfs mount point (default /dev/hugepages for 2M,
                   /dev/hugepages1G for 1G)
  --dry-run        print what would be done; needs no root, changes nothing

It never lowers a reservation that is already large enough. Exits 1 when the
kernel grants fewer pages than requested.
EOF
}

die() {
	echo "$prog: $*" >&2
	exit 1
}

usage_error() {
	echo "$prog: $*" >&2
	echo "run \`$prog --help\` for usage" >&2
	exit 2
}

# size_to_bytes TEXT: prints the number of bytes of a size written the way a
# device map writes it: 4096, 64KiB, 512MiB, 2GiB, 1.5GiB, 3GB, "2 GiB".
# Binary units (KiB, MiB, GiB, TiB, also Ki, Mi, ...) are powers of 1024;
# decimal ones (K/KB, M/MB, G/GB, T/TB) powers of 1000, as in the map.
size_to_bytes() {
	awk -v s="$1" 'BEGIN {
		t = s
		gsub(/^[ \t]+|[ \t]+$/, "", t)
		if (!match(t, /^[0-9]+(\.[0-9]+)?/)) exit 1
		num = substr(t, 1, RLENGTH) + 0
		unit = tolower(substr(t, RLENGTH + 1))
		gsub(/^[ \t]+/, "", unit)
		if (unit == "" || unit == "b") m = 1
		else if (unit == "k" || unit == "kb") m = 1000
		else if (unit == "ki" || unit == "kib") m = 1024
		else if (unit == "m" || unit == "mb") m = 1000 ^ 2
		else if (unit == "mi" || unit == "mib") m = 1024 ^ 2
		else if (unit == "g" || unit == "gb") m = 1000 ^ 3
		else if (unit == "gi" || unit == "gib") m = 1024 ^ 3
		else if (unit == "t" || unit == "tb") m = 1000 ^ 4
		else if (unit == "ti" || unit == "tib") m = 1024 ^ 4
		else exit 1
		b = num * m
		if (b < 1 || b > 2 ^ 53) exit 1
		# whole bytes, rounding a fraction up
		w = int(b)
		if (w < b) w++
		printf "%.0f\n", w
	}'
}

# yaml_section_key FILE SECTION KEY: prints the value of KEY inside the
# top-level mapping SECTION of a YAML file, written either as a block
#     spdk:
#       mem-size: 2GiB
# or as a flow mapping, on one line or several
#     spdk: { mem-size: 2GiB, hugepages: true, shm-id: 1 }
# Comments and quotes are stripped. Exits 1 when the key (or the section) is
# absent. Only this one shape is understood: it is not a YAML parser.
yaml_section_key() {
	awk -v section="$2" -v key="$3" '
	function strip(v) {
		gsub(/^[ \t]+|[ \t]+$/, "", v)
		if (v ~ /^".*"$/ || v ~ /^\x27.*\x27$/) v = substr(v, 2, length(v) - 2)
		return v
	}
	# Look for key in the text of a flow mapping ("{ a: 1, b: 2 }").
	function flow(text,    n, parts, i, kv) {
		gsub(/[{}]/, "", text)
		n = split(text, parts, ",")
		for (i = 1; i <= n; i++) {
			if (match(parts[i], /^[ \t]*[^:]+:/)) {
				kv = substr(parts[i], 1, RLENGTH - 1)
				if (strip(kv) == key) {
					print strip(substr(parts[i], RLENGTH + 1))
					found = 1
					exit 0
				}
			}
		}
	}
	BEGIN { state = 0; found = 0 }
	{
		line = $0
		sub(/\r$/, "", line)
		# a comment starts at a "#" at the start of the line or after a blank
		sub(/(^|[ \t])#.*$/, "", line)
		if (line ~ /^[ \t]*$/) next
		if (state == 2) {            # inside a multi-line flow mapping
			buf = buf " " line
			if (line ~ /}/) { flow(buf); state = 0 }
			next
		}
		if (line ~ /^[^ \t-]/) {     # a top-level key
			state = 0
			if (match(line, /^[^:]+:/) && strip(substr(line, 1, RLENGTH - 1)) == section) {
				rest = substr(line, RLENGTH + 1)
				if (rest ~ /{/) {
					if (rest ~ /}/) flow(rest)
					else { buf = rest; state = 2 }
				} else if (rest ~ /^[ \t]*$/) {
					state = 1; indent = -1
				}
			}
			next
		}
		if (state == 1) {            # inside the block mapping
			match(line, /^[ \t]*/)
			if (indent < 0) indent = RLENGTH
			if (RLENGTH != indent) next   # deeper (or odd) lines are not ours
			body = substr(line, RLENGTH + 1)
			if (match(body, /^[^:]+:/) && strip(substr(body, 1, RLENGTH - 1)) == key) {
				print strip(substr(body, RLENGTH + 1))
				found = 1
				exit 0
			}
		}
	}
	END { exit found ? 0 : 1 }
	' "$1"
}

# --- arguments ---------------------------------------------------------------

size=2M
count=""
mem=""
config=""
node=""
mount_dir=""
dry_run=0
sources=0

need_value() {
	[[ $# -ge 2 && -n "$2" ]] || usage_error "$1 needs a value"
}

while [[ $# -gt 0 ]]; do
	arg=$1
	if [[ $arg == --*=* ]]; then
		set -- "${arg%%=*}" "${arg#*=}" "${@:2}"
		arg=$1
	fi
	case $arg in
	--size)
		need_value "$@"
		size=$2
		shift 2
		;;
	--count)
		need_value "$@"
		count=$2
		sources=$((sources + 1))
		shift 2
		;;
	--mem)
		need_value "$@"
		mem=$2
		sources=$((sources + 1))
		shift 2
		;;
	--config)
		need_value "$@"
		config=$2
		sources=$((sources + 1))
		shift 2
		;;
	--node)
		need_value "$@"
		node=$2
		shift 2
		;;
	--mount)
		need_value "$@"
		mount_dir=$2
		shift 2
		;;
	--dry-run)
		dry_run=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage_error "unknown argument: $arg"
		;;
	esac
done

[[ $sources -eq 1 ]] || usage_error "give exactly one of --count, --mem, --config"

case ${size,,} in
2m | 2mb | 2mib | 2048k | 2048kb)
	size=2M
	page_kb=2048
	;;
1g | 1gb | 1gib | 1024m | 1048576k | 1048576kb)
	size=1G
	page_kb=1048576
	;;
*) usage_error "--size must be 2M or 1G, not \"$size\"" ;;
esac
page_bytes=$((page_kb * 1024))

if [[ -n $node && ! $node =~ ^[0-9]+$ ]]; then
	usage_error "--node must be a NUMA node number, not \"$node\""
fi

if [[ -z $mount_dir ]]; then
	if [[ $size == 2M ]]; then mount_dir=/dev/hugepages; else mount_dir=/dev/hugepages1G; fi
fi

# --- how many pages ----------------------------------------------------------

# pages_for BYTES: whole pages holding BYTES
pages_for() {
	echo $((($1 + page_bytes - 1) / page_bytes))
}

why=""
if [[ -n $count ]]; then
	[[ $count =~ ^[0-9]+$ && $count -gt 0 ]] || usage_error "--count must be a positive number of pages, not \"$count\""
	count=$((10#$count))
	why="--count $count"
elif [[ -n $mem ]]; then
	bytes=$(size_to_bytes "$mem") || usage_error "--mem: \"$mem\" is not a size (use 4096, 512MiB, 4GiB, 3GB, ...)"
	count=$(pages_for "$bytes")
	why="--mem $mem ($bytes bytes)"
else
	[[ -f $config && -r $config ]] || die "cannot read device map $config"
	if huge=$(yaml_section_key "$config" spdk hugepages); then
		case ${huge,,} in
		false | no | off)
			echo "$prog: $config: spdk.hugepages is $huge: the appliance runs without hugepages; nothing to reserve"
			exit 0
			;;
		esac
	fi
	if mem=$(yaml_section_key "$config" spdk mem-size) && [[ -n $mem ]]; then
		from="spdk.mem-size $mem in $config"
	else
		mem=$default_mem
		from="default $default_mem: $config has no spdk.mem-size"
	fi
	bytes=$(size_to_bytes "$mem") || die "$config: spdk.mem-size: \"$mem\" is not a size (use 512MiB, 2GiB, ...)"
	count=$(pages_for "$bytes")
	why="$from ($bytes bytes)"
fi

if [[ -n $node ]]; then
	where="node $node"
	hp_dir=/sys/devices/system/node/node$node/hugepages/hugepages-${page_kb}kB
else
	where="all nodes"
	hp_dir=/sys/kernel/mm/hugepages/hugepages-${page_kb}kB
fi
mib=$((count * page_kb / 1024))
echo "requested: $count pages of $size ($mib MiB) on $where, for $why"

# --- the kernel's view -------------------------------------------------------

# meminfo KEY: a number from /proc/meminfo (0 when absent)
meminfo() {
	awk -v k="$1:" '$1 == k { print $2; found = 1 } END { if (!found) print 0 }' /proc/meminfo
}

read_num() {
	local v
	v=$(cat "$1" 2>/dev/null) || v=0
	echo "${v:-0}"
}

# the hugetlbfs page size of a /proc/mounts options field, in kB ("" if none)
mount_page_kb() {
	local opts=$1 ps
	ps=$(tr ',' '\n' <<<"$opts" | sed -n 's/^pagesize=//p')
	if [[ -z $ps ]]; then
		meminfo Hugepagesize # a mount without the option uses the default size
		return
	fi
	case $ps in
	*K | *k) echo "${ps%?}" ;;
	*M | *m) echo $((${ps%?} * 1024)) ;;
	*G | *g) echo $((${ps%?} * 1024 * 1024)) ;;
	*) echo $((ps / 1024)) ;;
	esac
}

# mount_at DIR: "fstype options" of what is mounted at DIR ("" if nothing)
mount_at() {
	awk -v d="$1" '$2 == d { r = $3 " " $4 } END { if (r != "") print r }' /proc/mounts
}

report() {
	local total free
	total=$(read_num "$hp_dir/nr_hugepages")
	free=$(read_num "$hp_dir/free_hugepages")
	echo "got: $total pages of $size on $where ($((total * page_kb / 1024)) MiB; $count requested), $free free"
	echo "/proc/meminfo: HugePages_Total $(meminfo HugePages_Total), HugePages_Free $(meminfo HugePages_Free)" \
		"(pages of the default size, Hugepagesize $(meminfo Hugepagesize) kB)"
	if [[ $total -lt $count ]]; then
		echo "$prog: got only $total of the $count pages of $size asked for: memory is too small or too" \
			"fragmented; reserve at boot instead (kernel command line: hugepagesz=$size hugepages=$count)" >&2
		return 1
	fi
	if [[ $free -lt $count ]]; then
		echo "note: $((total - free)) of the pages are in use (a running SPDK process holds them)"
	fi
	return 0
}

# --- dry run -----------------------------------------------------------------

if [[ $dry_run -eq 1 ]]; then
	if [[ ! -d $hp_dir ]]; then
		echo "dry-run: this machine has no $hp_dir: reserving $size pages here would fail"
	else
		current=$(read_num "$hp_dir/nr_hugepages")
		if [[ $current -ge $count ]]; then
			echo "dry-run: $current pages are reserved already; would leave $hp_dir/nr_hugepages as it is"
		else
			echo "dry-run: would write $count to $hp_dir/nr_hugepages (now $current)"
		fi
	fi
	mounted=$(mount_at "$mount_dir")
	if [[ -z $mounted ]]; then
		echo "dry-run: would mount hugetlbfs (pagesize=$size) on $mount_dir"
	else
		read -r fstype opts <<<"$mounted"
		if [[ $fstype == hugetlbfs && $(mount_page_kb "$opts") == "$page_kb" ]]; then
			echo "dry-run: hugetlbfs (pagesize=$size) already mounted on $mount_dir"
		else
			echo "dry-run: $mount_dir has a $fstype mount ($opts), not a hugetlbfs of $size pages: this would fail"
		fi
	fi
	exit 0
fi

# --- reserve -----------------------------------------------------------------

if [[ $EUID -ne 0 ]]; then
	die "must run as root: it writes $hp_dir/nr_hugepages and mounts hugetlbfs (--dry-run shows what it would do without root)"
fi

if [[ ! -d $hp_dir ]]; then
	if [[ -n $node && ! -d /sys/devices/system/node/node$node ]]; then
		die "there is no NUMA node $node (see /sys/devices/system/node)"
	fi
	hint=""
	[[ $size == 1G ]] && hint=" (1 GiB pages need a CPU with pdpe1gb)"
	die "this kernel offers no $size pages: there is no $hp_dir$hint"
fi

# What is mounted at the mount point must be nothing or a hugetlbfs of this
# page size; find out before reserving anything.
mounted=$(mount_at "$mount_dir")
if [[ -n $mounted ]]; then
	read -r fstype opts <<<"$mounted"
	if [[ $fstype != hugetlbfs ]]; then
		die "$mount_dir is a $fstype mount, not hugetlbfs: pick another --mount"
	fi
	have_kb=$(mount_page_kb "$opts")
	if [[ $have_kb != "$page_kb" ]]; then
		die "$mount_dir is a hugetlbfs of ${have_kb} kB pages, not $size: pick another --mount"
	fi
fi

current=$(read_num "$hp_dir/nr_hugepages")
if [[ $current -ge $count ]]; then
	echo "already reserved: $current pages of $size on $where; left as they are"
else
	echo "$count" >"$hp_dir/nr_hugepages" || die "cannot write $hp_dir/nr_hugepages"
	if [[ $(read_num "$hp_dir/nr_hugepages") -lt $count && -w /proc/sys/vm/compact_memory ]]; then
		# Fragmented memory: compact it and ask once more.
		echo 1 >/proc/sys/vm/compact_memory || true
		echo "$count" >"$hp_dir/nr_hugepages" || die "cannot write $hp_dir/nr_hugepages"
	fi
	echo "wrote $count to $hp_dir/nr_hugepages"
fi

# --- mount -------------------------------------------------------------------

if [[ -z $mounted ]]; then
	mkdir -p "$mount_dir"
	mount -t hugetlbfs -o "pagesize=$size" nodev "$mount_dir" || die "cannot mount hugetlbfs on $mount_dir"
	echo "mounted hugetlbfs (pagesize=$size) on $mount_dir"
else
	echo "hugetlbfs (pagesize=$size) already mounted on $mount_dir"
fi

report
