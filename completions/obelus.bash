# completions/obelus.bash -- bash completion for obelus (`make install` puts it in
# share/bash-completion/completions/obelus). Commands; each command's options, read
# from `obelus COMMAND --help` so that they never fall out of step; the values of the
# options that take a few; files for the rest, and .lua files or folders for --tools.
_obelus() {
  local cur prev cmd opts
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "run check loop graph resolve schema log resume fork ui tools init
                                mcp report submit worker wait status --help --version" -- "$cur") )
    return 0
  fi
  cmd=${COMP_WORDS[1]}
  case $prev in
    --tools)
      compopt -o filenames 2>/dev/null
      COMPREPLY=( $(compgen -d -- "$cur") $(compgen -f -X '!*.lua' -- "$cur") )
      return 0 ;;
    --fsync)
      COMPREPLY=( $(compgen -W "never batch always" -- "$cur") )
      return 0 ;;
    --format)
      case $cmd in
        graph) opts="dot mermaid svg" ;;
        tools) opts="json-schema openai anthropic mcp" ;;
        log) opts="text trace otlp" ;;
        *) opts="" ;;
      esac
      COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
      return 0 ;;
    --redis)
      COMPREPLY=( $(compgen -W "redis://127.0.0.1:6379" -- "$cur") )
      return 0 ;;
    --queue|--name|--jobs|--claim-idle|--max-deliveries|--grace|--timeout|--concurrency|\
    --drain-timeout|--max-depth|--call-timeout|--max-memory|--max-output|--max-calls|\
    --max-slice|--http-max|--http-max-bytes|--max-steps|--at|--instance|--shard|--max-line|--max-edges|\
    --from|--set|--port|--bind|--token)
      COMPREPLY=()
      return 0 ;;
  esac
  if [[ $cur == -* ]]; then
    opts=$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)
    COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
  else
    compopt -o filenames 2>/dev/null
    COMPREPLY=( $(compgen -f -- "$cur") )
  fi
  return 0
}
complete -F _obelus obelus
