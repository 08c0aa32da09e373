#!/bin/sh
# One-shot `config-check` of docker-compose.yml: every other service waits for it
# (depends_on: condition: service_completed_successfully), so the stack refuses to start while
# any setting still has its .env.example placeholder. Arguments: the names of the variables to
# check (all of them must be in this process's environment). Refused, naming the variables and
# never printing a value, when a variable is
#   - unset or empty,
#   - still a placeholder (contains "change-me", any case),
#   - a secret (name contains PASSWORD, SECRET, AUTH_STRING or _KEY) shorter than 16 characters
#     or holding characters that break a URL (allowed: A-Z a-z 0-9 . _ ~ - and, in an
#     AUTH_STRING, one ":" between user and password),
#   - a secret equal to another one (one credential per service).
# Tested for real by tests/test_compose.py.
set -eu

[ "$#" -gt 0 ] || { echo "config-check: no variable names given" >&2; exit 2; }

bad=""
secrets=""
for name in "$@"; do
    case "$name" in
        ""|[0-9]*|*[!A-Za-z0-9_]*) echo "config-check: bad variable name" >&2; exit 2 ;;
    esac
    eval "value=\${$name-}"
    if [ -z "$value" ]; then
        bad="$bad $name(empty)"
        continue
    fi
    lower=$(printf '%s' "$value" | tr 'A-Z' 'a-z')
    case "$lower" in
        *change-me*|*changeme*) bad="$bad $name(placeholder)"; continue ;;
    esac
    case "$name" in
        *PASSWORD*|*SECRET*|*AUTH_STRING*|*_KEY*) ;;
        *) continue ;;
    esac
    secret="${value#*:}"
    case "$name" in *AUTH_STRING*) ;; *) secret="$value" ;; esac
    if [ "${#secret}" -lt 16 ]; then
        bad="$bad $name(shorter-than-16)"
        continue
    fi
    case "$secret" in
        *[!A-Za-z0-9._~-]*) bad="$bad $name(not-url-safe)"; continue ;;
    esac
    for other in $secrets; do
        eval "seen=\${$other}"
        if [ "$seen" = "$value" ]; then
            bad="$bad $name(same-as-$other)"
        fi
    done
    secrets="$secrets $name"
done

if [ -n "$bad" ]; then
    echo "config-check: refusing to start; fix these in .env (openssl rand -hex 24):$bad" >&2
    exit 1
fi
echo "config-check: $# settings ok"
