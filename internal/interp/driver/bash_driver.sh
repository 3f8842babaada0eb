# Warden's bash driver: a persistent shell that runs one request at a time.
#
# The host starts it as `bash --noprofile --norc -c <this file>` with
# requests on descriptor 3 and replies on 4. A request is a token line, the
# code's lines, and the token line again. The code runs in this shell (so
# cd, variables and functions persist) from a function, so that its break,
# continue and return cannot leave the loop below, without the control
# descriptors (bash keeps its saved copies close-on-exec). Then the token goes to stdout and stderr and a
# "done" line with the status goes to the replies.
exec {__warden_ctl}<&3 {__warden_rep}>&4 {__warden_in}<&0 {__warden_out}>&1 {__warden_err}>&2 3<&- 4<&-
__warden_run() {
	eval "$__warden_code"
}
printf '{"t":"ready"}\n' >&"$__warden_rep"
while IFS= read -r -u "$__warden_ctl" __warden_tok; do
	__warden_code=
	while IFS= read -r -u "$__warden_ctl" __warden_line && [[ $__warden_line != "$__warden_tok" ]]; do
		__warden_code+=$__warden_line$'\n'
	done
	exec <&"$__warden_in" >&"$__warden_out" 2>&"$__warden_err"
	__warden_run {__warden_ctl}<&- {__warden_rep}>&-
	__warden_status=$?
	printf %s "$__warden_tok" >&"$__warden_out"
	printf %s "$__warden_tok" >&"$__warden_err"
	printf '{"t":"done","exit_code":%d}\n' "$__warden_status" >&"$__warden_rep"
done
