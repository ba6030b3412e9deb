# completions/obelus.bash -- bash completion for obelus, written by `obelus completion bash`
# from the table of commands and options the command line parses with
# (core/cli/ob_cli_opts.c): do not edit; `make completions` writes it again.
# `make install` puts it in share/bash-completion/completions/obelus.
_obelus() {
  local cur prev cmd pre= rest= i w
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  cmd=${COMP_WORDS[1]}
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "run check loop resolve schema tools init mcp report ui graph log resume fork completion help submit worker wait status --help --version" -- "$cur") )
    return 0
  fi
  # --opt=value: bash cuts the word at '=' (COMP_WORDBREAKS), or not
  if [ "$cur" = = ]; then
    cur=
  elif [ "$prev" = = ] && [ "$COMP_CWORD" -gt 2 ]; then
    prev=${COMP_WORDS[COMP_CWORD-2]}
  elif [[ $cur == --*=* ]]; then
    prev=${cur%%=*} pre=${cur%%=*}= cur=${cur#*=}
  fi
  # after --, arguments only
  for ((i = 2; i < COMP_CWORD; i++)); do
    [ "${COMP_WORDS[i]}" = -- ] && rest=1
  done
  if [ -z "$rest" ]; then
    case "$cmd $prev" in
    *' --tools')
      compopt -o filenames 2>/dev/null
      COMPREPLY=( $(compgen -d -- "$cur") $(compgen -f -X '!*.lua' -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    *' --input'|*' --concurrency'|*' --threads'|*' --drain-timeout'|*' --call-timeout'|*' --max-depth'|*' --max-memory'|*' --max-output'|*' --max-calls'|*' --max-slice'|*' --http-max'|*' --http-max-bytes'|*' --max-steps'|*' --at'|*' --from'|*' --set'|*' --instance'|*' --max-edges'|*' --max-line'|*' --bind'|*' --port'|*' --token'|*' --queue'|*' --shard'|*' --jobs'|*' --claim-idle'|*' --max-deliveries'|*' --keep-journals'|*' --keep-results'|*' --grace'|*' --name'|*' --timeout'|'wait --batch')
      COMPREPLY=()
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    *' --latent'|*' --approver'|*' --journal'|*' --events'|*' --planner'|*' --output'|*' -o'|'submit --batch'|*' --ids')
      compopt -o filenames 2>/dev/null
      COMPREPLY=( $(compgen -f -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    *' --plans-root'|*' --journals'|*' --dir')
      compopt -o filenames 2>/dev/null
      COMPREPLY=( $(compgen -d -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    *' --fsync')
      COMPREPLY=( $(compgen -W "never batch always" -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    'tools --format')
      COMPREPLY=( $(compgen -W "json-schema openai anthropic mcp" -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    'graph --format')
      COMPREPLY=( $(compgen -W "dot mermaid svg" -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    'log --format')
      COMPREPLY=( $(compgen -W "text trace otlp" -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    *' --redis')
      COMPREPLY=( $(compgen -W "redis://127.0.0.1:6379" -- "$cur") )
      COMPREPLY=( "${COMPREPLY[@]/#/$pre}" )
      return 0 ;;
    esac
    if [[ $cur == -* ]]; then
      case $cmd in
        run) w="--help --tools --input --latent --approver --plans-root --lenient-schemas --journal --overwrite --fsync --events --approve --concurrency --threads --drain-timeout --call-timeout --max-depth --max-memory --max-output --max-calls --max-slice --http-max --http-max-bytes --http-allow-private" ;;
        check) w="--help --tools --input --latent --approver --plans-root --lenient-schemas --journal --overwrite --fsync --events --approve --concurrency --threads --drain-timeout --call-timeout --max-depth --max-memory --max-output --max-calls --max-slice --http-max --http-max-bytes --http-allow-private" ;;
        loop) w="--help --tools --input --latent --approver --plans-root --lenient-schemas --journal --overwrite --fsync --events --approve --concurrency --drain-timeout --call-timeout --max-depth --max-memory --max-output --max-calls --max-slice --http-max --http-max-bytes --http-allow-private --planner --max-steps" ;;
        resolve) w="--help --at --instance" ;;
        schema) w="--help" ;;
        tools) w="--help --tools --latent --approver --lenient-schemas --format --plan-schema --strict" ;;
        init) w="--help" ;;
        mcp) w="--help --tools --latent --approver --lenient-schemas --drain-timeout --max-slice --http-max-bytes --http-allow-private --http --max-line --bind --port --token" ;;
        report) w="--help --output" ;;
        ui) w="--help --tools --latent --approver --lenient-schemas --concurrency --call-timeout --max-depth --max-output --max-calls --max-slice --http-max-bytes --http-allow-private --journals --bind --port --token --redis --queue" ;;
        graph) w="--help --tools --plans-root --lenient-schemas --journal --max-calls --format --max-edges" ;;
        log) w="--help --at --format --redis --queue" ;;
        resume) w="--help --tools --latent --approver --plans-root --lenient-schemas --fsync --events --approve --concurrency --drain-timeout --call-timeout --max-depth --max-memory --max-output --max-calls --max-slice --http-max --http-max-bytes --http-allow-private --force" ;;
        fork) w="--help --tools --input --latent --approver --plans-root --lenient-schemas --journal --overwrite --fsync --events --approve --concurrency --drain-timeout --call-timeout --max-depth --max-memory --max-output --max-calls --max-slice --http-max --http-max-bytes --http-allow-private --at --from --set" ;;
        completion) w="--help" ;;
        help) w="--help" ;;
        submit) w="--help --tools --input --latent --approver --lenient-schemas --redis --queue --batch --shard" ;;
        worker) w="--help --tools --latent --approver --plans-root --lenient-schemas --concurrency --call-timeout --max-depth --max-memory --max-output --max-calls --max-slice --http-max --http-max-bytes --http-allow-private --redis --queue --jobs --claim-idle --max-deliveries --drain --keep-journals --keep-results --grace --name --dir" ;;
        wait) w="--help --redis --queue --timeout --ids --batch" ;;
        status) w="--help --redis --queue --json" ;;
      esac
      COMPREPLY=( $(compgen -W "$w" -- "$cur") )
      return 0
    fi
  fi
  case $cmd in
    run|check|loop|resolve|schema|report|graph|log|resume|fork|submit)
      compopt -o filenames 2>/dev/null
      COMPREPLY=( $(compgen -f -- "$cur") ) ;;
    init)
      compopt -o filenames 2>/dev/null
      COMPREPLY=( $(compgen -d -- "$cur") ) ;;
    completion)
      COMPREPLY=( $(compgen -W "bash zsh json" -- "$cur") ) ;;
    help)
      COMPREPLY=( $(compgen -W "run check loop resolve schema tools init mcp report ui graph log resume fork completion help submit worker wait status" -- "$cur") ) ;;
  esac
  return 0
}
complete -F _obelus obelus
