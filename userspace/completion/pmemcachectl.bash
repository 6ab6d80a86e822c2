# bash completion of pmemcachectl(8)
_pmemcachectl_dm_names()
{
	local n
	for n in /dev/mapper/*; do
		[ "$n" = /dev/mapper/control ] || printf '%s\n' "${n#/dev/mapper/}"
	done
}

_pmemcachectl()
{
	local cur prev cmd opts
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	local cmds="create activate status list monitor flush remove detach replace set check udev-probe drain help"
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
		return
	fi
	cmd=${COMP_WORDS[1]}
	case $prev in
	-o|--options)
		# status/list: -o FIELDS; create/check: -o DEV
		if [[ $cmd =~ ^(status|list)$ ]]; then
			COMPREPLY=($(compgen -W "help $(pmemcachectl status -o help 2>/dev/null |
				sed -n 's/^  \([a-z_]*\) .*/\1/p')" -- "$cur"))
			return
		fi
		COMPREPLY=($(compgen -f -- "${cur:-/dev/}"))
		return ;;
	--origin|--cache|--mirror)
		COMPREPLY=($(compgen -f -- "${cur:-/dev/}"))
		return ;;
	-c)
		if [ "$cmd" = create ]; then
			COMPREPLY=($(compgen -f -- "${cur:-/dev/}"))
			return
		fi ;;
	--separator)
		return ;;
	-p|--program)
		COMPREPLY=($(compgen -c -- "$cur"))
		return ;;
	--writeback)
		COMPREPLY=($(compgen -W "pfn bounce auto" -- "$cur"))
		return ;;
	-b|--block-size)
		COMPREPLY=($(compgen -W "512 1024 2048 4096" -- "$cur"))
		return ;;
	esac
	case $cmd in
	create)
		opts="--origin --cache --block-size --high-watermark --low-watermark
		      --writeback-jobs --max-age --writeback --flush-on-suspend --cleaner
		      --format --force --mirror --degraded --data-crc" ;;
	activate)
		opts="--all --name --wait --dry-run"
		if [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -W "$(ls -d /dev/pmem* 2>/dev/null)" -- "$cur"))
			return
		fi ;;
	status) opts="--json --interval --columns --options --noheadings --separator" ;;
	list) opts="--options --noheadings --separator --json --columns" ;;
	monitor) opts="--program --oneshot --foreground" ;;
	flush) opts="--quiet" ;;
	remove) opts="--keep-dirty --force --quiet" ;;
	detach) opts="--timeout --quiet" ;;
	set)
		if [ "$COMP_CWORD" -eq 3 ]; then
			COMPREPLY=($(compgen -W "high_watermark low_watermark writeback_jobs
				stripe_blocks full_wait seq_bypass cleaner max_age resync_rate" -- "$cur"))
			return
		fi ;;
	check) opts="--origin --mirror --json" ;;
	replace) opts="--cache --no-wait" ;;
	drain) opts="--mirror --degraded --dry-run --no-mark-clean --json" ;;
	help)
		COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
	elif [[ $cmd =~ ^(status|flush|remove|detach|set)$ ]] && [ "$COMP_CWORD" -eq 2 ]; then
		COMPREPLY=($(compgen -W "$(_pmemcachectl_dm_names)" -- "$cur"))
	elif [ "$cmd" = monitor ]; then
		COMPREPLY=($(compgen -W "$(_pmemcachectl_dm_names)" -- "$cur"))
	elif [[ $cmd =~ ^(check|drain|udev-probe)$ ]]; then
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -F _pmemcachectl pmemcachectl
