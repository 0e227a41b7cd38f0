#!/usr/bin/env bash
# Bind the NVMe controllers of a Stria device map to a userspace driver for
# SPDK (vfio-pci, or uio_pci_generic where there is no IOMMU), or give them
# back to the kernel's nvme driver with --reset.
#
#   bind.sh [--config MAP.yaml] [--reset] [--driver vfio-pci|uio_pci_generic] [--dry-run]
#
# The devices are the `address:` of every device with `transport: pcie` in the
# map. Every device is checked before any is touched: a device that is not an
# NVMe controller, that does not exist, or that is in use (a mounted
# filesystem, swap, a holder such as LVM or RAID, a process holding it open)
# is refused, and then nothing is changed. See spdk-env/README.md.
set -euo pipefail

prog=bind.sh
nvme_class=0x010802

usage() {
	cat <<'EOF'
usage: bind.sh [--config MAP.yaml] [--reset] [--driver vfio-pci|uio_pci_generic] [--dry-run]

  --config MAP   the device map (default /etc/stria/stria.yaml); its devices
                 with `transport: pcie` are bound by their `address:`
  --reset        give the devices back to the kernel's nvme driver
  --driver D     bind to D instead of the automatic choice (vfio-pci when the
                 machine has IOMMU groups or vfio's no-IOMMU mode is on,
                 otherwise uio_pci_generic)
  --dry-run      check everything and print what would be done; needs no
                 root, changes nothing

Exits 1, changing nothing, when any device is refused.
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

config=/etc/stria/stria.yaml
reset=0
dry_run=0
driver=""

while [[ $# -gt 0 ]]; do
	arg=$1
	if [[ $arg == --*=* ]]; then
		set -- "${arg%%=*}" "${arg#*=}" "${@:2}"
		arg=$1
	fi
	case $arg in
	--config)
		[[ $# -ge 2 && -n $2 ]] || usage_error "--config needs a file"
		config=$2
		shift 2
		;;
	--driver)
		[[ $# -ge 2 && -n $2 ]] || usage_error "--driver needs a driver name"
		driver=$2
		shift 2
		;;
	--reset)
		reset=1
		shift
		;;
	--dry-run)
		dry_run=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*) usage_error "unknown argument: $arg" ;;
	esac
done

case $driver in
"" | vfio-pci | uio_pci_generic) ;;
*) usage_error "--driver must be vfio-pci or uio_pci_generic, not \"$driver\"" ;;
esac
if [[ $reset -eq 1 && -n $driver ]]; then
	usage_error "--reset always gives the devices to nvme; --driver does not go with it"
fi

if [[ $dry_run -eq 0 && $EUID -ne 0 ]]; then
	die "must run as root: it rebinds PCI drivers through /sys/bus/pci (--dry-run checks and shows what it would do without root)"
fi

[[ -f $config && -r $config ]] || die "cannot read device map $config"

# --- the devices of the map ----------------------------------------------------

# Prints "name<TAB>transport<TAB>address" for each item of the top-level
# `devices:` list, written as flow mappings (`- { name: a, address: "..." }`)
# or as block mappings (`- name: a` with the keys below it). Comments and
# quotes are stripped. Not a YAML parser: just the shapes a device map uses.
map_devices() {
	awk '
	function strip(v) {
		gsub(/^[ \t]+|[ \t]+$/, "", v)
		if (v ~ /^".*"$/ || v ~ /^\x27.*\x27$/) v = substr(v, 2, length(v) - 2)
		return v
	}
	function flush_item(    n, parts, i, k, v, name, transport, address, p) {
		if (item == "") return
		gsub(/[{}]/, ",", item)
		n = split(item, parts, /[,\n]/)
		name = transport = address = ""
		for (i = 1; i <= n; i++) {
			# the key ends at the first ":" followed by a blank or the end
			p = match(parts[i], /:([ \t]|$)/)
			if (!p) continue
			k = strip(substr(parts[i], 1, p - 1))
			v = strip(substr(parts[i], p + 1))
			if (k == "name" && name == "") name = v
			else if (k == "transport" && transport == "") transport = v
			else if (k == "address" && address == "") address = v
		}
		printf "%s\t%s\t%s\n", (name == "" ? "?" : name), transport, address
		item = ""
	}
	BEGIN { in_devices = 0; item = ""; dash = -1 }
	{
		line = $0
		sub(/\r$/, "", line)
		sub(/(^|[ \t])#.*$/, "", line)
		if (line ~ /^[ \t]*$/) next
		if (line ~ /^[^ \t-]/) {     # a top-level key
			flush_item()
			in_devices = (line ~ /^devices[ \t]*:/)
			dash = -1
			next
		}
		if (!in_devices) next
		match(line, /^[ \t]*/)
		ind = RLENGTH
		body = substr(line, ind + 1)
		if (body ~ /^-([ \t]|$)/ && (dash < 0 || ind == dash)) {
			flush_item()
			dash = ind
			item = substr(body, 2)
		} else {
			item = item "\n" body
		}
	}
	END { flush_item() }
	' "$1"
}

addrs=()
names=()
while IFS=$'\t' read -r name transport address; do
	[[ $transport == pcie ]] || continue
	a=${address,,}
	if [[ $a =~ ^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]]; then
		a="0000:$a"
	fi
	if [[ ! $a =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]]; then
		die "$config: device $name: \"$address\" is not a PCI address (like 0000:01:00.0)"
	fi
	dup=0
	for seen in "${addrs[@]}"; do
		[[ $seen == "$a" ]] && dup=1
	done
	[[ $dup -eq 1 ]] && continue
	addrs+=("$a")
	names+=("$name")
done < <(map_devices "$config")

if [[ ${#addrs[@]} -eq 0 ]]; then
	echo "$prog: $config has no device with \`transport: pcie\`; nothing to do"
	exit 0
fi

# --- the target driver ---------------------------------------------------------

iommu_groups=0
if [[ -d /sys/kernel/iommu_groups ]]; then
	iommu_groups=$(find /sys/kernel/iommu_groups -mindepth 1 -maxdepth 1 | wc -l)
fi
noiommu=$(cat /sys/module/vfio/parameters/enable_unsafe_noiommu_mode 2>/dev/null || echo N)

if [[ $reset -eq 1 ]]; then
	target=nvme
	echo "giving ${#addrs[@]} device(s) of $config back to nvme"
elif [[ -n $driver ]]; then
	target=$driver
	echo "binding ${#addrs[@]} device(s) of $config to $target (--driver)"
elif [[ $iommu_groups -gt 0 ]]; then
	target=vfio-pci
	echo "binding ${#addrs[@]} device(s) of $config to vfio-pci (the IOMMU is on: $iommu_groups groups)"
elif [[ $noiommu == Y ]]; then
	target=vfio-pci
	echo "binding ${#addrs[@]} device(s) of $config to vfio-pci (no IOMMU, vfio's unsafe no-IOMMU mode is on)"
else
	target=uio_pci_generic
	echo "binding ${#addrs[@]} device(s) of $config to uio_pci_generic (no IOMMU: /sys/kernel/iommu_groups is empty)"
fi

# --- checks --------------------------------------------------------------------

current_driver() {
	local link=/sys/bus/pci/devices/$1/driver
	if [[ -e $link ]]; then
		basename "$(readlink -f "$link")"
	fi
}

# pids_holding PATH: "pid(comm) ..." of the processes with PATH open
pids_holding() {
	local fd pid out=""
	[[ -e $1 ]] || return 0
	while read -r fd; do
		pid=${fd#/proc/}
		pid=${pid%%/*}
		out+="$pid($(cat "/proc/$pid/comm" 2>/dev/null || echo '?')) "
	done < <(find /proc/[0-9]*/fd -maxdepth 1 -lname "$1" 2>/dev/null | sort -u -t/ -k3,3n)
	echo "${out% }"
}

# block_devices ADDR: the namespace block devices of an nvme-bound controller,
# per-path (nvme0c0n1) and multipath heads (nvme0n1) alike
block_devices() {
	local dev=/sys/bus/pci/devices/$1 ctrl cname ns sub
	for ctrl in "$dev"/nvme/nvme*; do
		[[ -d $ctrl ]] || continue
		cname=$(basename "$ctrl")
		for ns in "$ctrl"/nvme*n*; do
			[[ -e $ns ]] && basename "$ns"
		done
		for sub in /sys/class/nvme-subsystem/*; do
			[[ -e $sub/$cname ]] || continue
			for ns in "$sub"/nvme*n*; do
				[[ -e $ns ]] && basename "$ns"
			done
		done
	done | sort -u
}

# in_use NAME: why the block device NAME (a namespace or a partition) is in
# use, one reason a line; nothing when it is free
in_use() {
	local name=$1 sys=/sys/class/block/$1 majmin holder pids
	[[ -e $sys ]] || return 0
	majmin=$(cat "$sys/dev")
	# mounted: by device number, or by a source naming this device
	while read -r mm src mnt; do
		if [[ $mm == "$majmin" ]] || [[ $src == /dev/* && $(readlink -f "$src" 2>/dev/null) == "/dev/$name" ]]; then
			echo "$name is mounted on $mnt"
		fi
	done < <(awk '{ for (i = 7; i <= NF && $i != "-"; i++) ; print $3, $(i + 2), $5 }' /proc/self/mountinfo)
	while read -r src _; do
		if [[ $(readlink -f "$src" 2>/dev/null) == "/dev/$name" ]]; then
			echo "$name is in use as swap"
		fi
	done < <(tail -n +2 /proc/swaps)
	for holder in "$sys"/holders/*; do
		[[ -e $holder ]] && echo "$name is held by $(basename "$holder") (device-mapper, LVM, RAID or similar)"
	done
	pids=$(pids_holding "/dev/$name")
	if [[ -n $pids ]]; then
		echo "/dev/$name is open by $pids"
	fi
}

# userspace_nodes ADDR: the device nodes through which a userspace driver
# (SPDK) holds a vfio-pci or uio_pci_generic device
userspace_nodes() {
	local dev=/sys/bus/pci/devices/$1 group u
	if [[ -e $dev/iommu_group ]]; then
		group=$(basename "$(readlink -f "$dev/iommu_group")")
		echo "/dev/vfio/$group"
		echo "/dev/vfio/noiommu-$group"
	fi
	for u in "$dev"/uio/uio*; do
		[[ -e $u ]] && echo "/dev/$(basename "$u")"
	done
}

refused=0
plan=()
for i in "${!addrs[@]}"; do
	addr=${addrs[$i]}
	label="$addr (${names[$i]})"
	dev=/sys/bus/pci/devices/$addr
	if [[ ! -e $dev ]]; then
		echo "$label: REFUSED: no such PCI device $addr (\`lspci -D\` lists this machine's)"
		refused=$((refused + 1))
		continue
	fi
	class=$(cat "$dev/class")
	if [[ $class != "$nvme_class" ]]; then
		echo "$label: REFUSED: not an NVMe controller (PCI class $class, an NVMe controller is $nvme_class)"
		refused=$((refused + 1))
		continue
	fi
	cur=$(current_driver "$addr")
	if [[ $cur == "$target" ]]; then
		echo "$label: already on $target"
		continue
	fi
	reasons=""
	case $cur in
	nvme)
		for b in $(block_devices "$addr"); do
			reasons+=$(in_use "$b")$'\n'
			for p in /sys/class/block/"$b"/"$b"*; do
				[[ -e $p/partition ]] && reasons+=$(in_use "$(basename "$p")")$'\n'
			done
		done
		;;
	vfio-pci | uio_pci_generic)
		while read -r node; do
			pids=$(pids_holding "$node")
			[[ -n $pids ]] && reasons+="$node is open by $pids (a running SPDK process?)"$'\n'
		done < <(userspace_nodes "$addr")
		;;
	"") ;;
	*)
		reasons="it is bound to $cur, which this script does not take devices from"
		;;
	esac
	reasons=$(sed '/^$/d' <<<"$reasons")
	if [[ -n $reasons ]]; then
		while read -r r; do
			echo "$label: REFUSED: $r"
		done <<<"$reasons"
		refused=$((refused + 1))
		continue
	fi
	plan+=("$i")
done

if [[ $refused -gt 0 ]]; then
	die "refused $refused of ${#addrs[@]} device(s); nothing was changed"
fi

# --- binding -------------------------------------------------------------------

if [[ ${#plan[@]} -gt 0 && ! -d /sys/bus/pci/drivers/$target ]]; then
	if [[ $dry_run -eq 1 ]]; then
		echo "dry-run: would load the $target module"
	else
		modprobe "$target" || die "cannot load the $target module"
		[[ -d /sys/bus/pci/drivers/$target ]] || die "the $target driver did not appear after modprobe"
		echo "loaded the $target module"
	fi
fi

# IOMMU group note for vfio-pci: every device of a group must be on vfio-pci
# (or no driver) before SPDK can open the group.
group_note() {
	local dev=/sys/bus/pci/devices/$1 group other d
	[[ $target == vfio-pci && -e $dev/iommu_group ]] || return 0
	group=$(basename "$(readlink -f "$dev/iommu_group")")
	for other in "$dev"/iommu_group/devices/*; do
		[[ $(basename "$other") == "$1" ]] && continue
		d=$(current_driver "$(basename "$other")")
		case $d in
		"" | vfio-pci | pci-stub | pcieport) ;;
		*) echo "    warning: IOMMU group $group also holds $(basename "$other") on $d; vfio needs it on vfio-pci too" ;;
		esac
	done
	echo "    IOMMU group $group: SPDK opens /dev/vfio/$group"
}

for i in "${plan[@]}"; do
	addr=${addrs[$i]}
	label="$addr (${names[$i]})"
	dev=/sys/bus/pci/devices/$addr
	cur=$(current_driver "$addr")
	from=${cur:-no driver}
	if [[ $dry_run -eq 1 ]]; then
		echo "$label: would rebind $from -> $target"
		group_note "$addr"
		continue
	fi
	echo "$target" >"$dev/driver_override"
	if [[ -n $cur ]]; then
		echo "$addr" >"$dev/driver/unbind"
	fi
	echo "$addr" >/sys/bus/pci/drivers_probe
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		[[ $(current_driver "$addr") == "$target" ]] && break
		sleep 0.2
	done
	if [[ $target == nvme ]]; then
		# back to the kernel's default matching
		echo >"$dev/driver_override"
	fi
	now=$(current_driver "$addr")
	if [[ $now != "$target" ]]; then
		die "$label: was $from, is now ${now:-without a driver}, not $target (see dmesg)"
	fi
	echo "$label: $from -> $target"
	group_note "$addr"
done

if [[ $dry_run -eq 1 ]]; then
	echo "dry-run: nothing was changed"
fi
