#!/usr/bin/env bash
# A Kubernetes source tree crdscale can build a release from whose Go module lacks the generated OpenAPI
# definitions (pkg/generated/openapi/zz_generated.openapi.go: generated at build time up to v1.23,
# committed from v1.24 on; without it `crdscale binaries --kube-version 1.23.1` fails with
# "undefined: generatedopenapi.GetOpenAPIDefinitions").
#
#   bash scripts/kube_tree_with_openapi.sh 1.23.1 /work/runs/k8s-v1.23.1
#   crdscale run SCENARIO --set 'target.kube_version="1.23.1"' --set 'target.kube_source="/work/runs/k8s-v1.23.1"'
#
# Copies the module k8s.io/kubernetes@vVERSION from the Go module cache (downloading it), and runs the
# release's own openapi-gen (k8s.io/kube-openapi at the version its go.mod pins) over every package of the
# release and its staging modules that carries +k8s:openapi-gen=true, as the release's Makefile does.
# Measured here: ~6 min on 2 loaded cores (openapi-gen 5 min), then `crdscale` builds the tree in ~2 min
# after a build of the module (its packages are in Go's build cache).
set -euo pipefail
version="${1:?usage: $0 VERSION DIR}"
version="${version#v}"
tree="${2:?usage: $0 VERSION DIR}"
minor="${version#1.}"
minor="${minor%%.*}"
staging="v0.${minor}.${version##*.}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$work"
cat > go.mod <<EOF
module crdscale.local/openapi-gen

go 1.16

require k8s.io/kubernetes v${version}
EOF
GOFLAGS=-mod=mod go mod download "k8s.io/kubernetes@v${version}"
module="$(go env GOMODCACHE)/k8s.io/kubernetes@v${version}"
if [[ -e "$tree" ]]; then
  echo "$tree exists; remove it first" >&2
  exit 2
fi
cp -r "$module" "$tree"
chmod -R u+w "$tree"
if [[ -f "$tree/pkg/generated/openapi/zz_generated.openapi.go" ]]; then
  echo "$tree: v${version} already has its OpenAPI definitions; build it as a release" >&2
  exit 0
fi

# The release's go.mod pins its staging modules by replace directives; a module of our own takes them over.
{
  echo "module crdscale.local/openapi-gen"
  echo
  echo "go 1.16"
  echo
  echo "require k8s.io/kubernetes v${version}"
  echo
  echo "replace k8s.io/kubernetes => ${tree}"
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$tree/go.mod" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
} > go.mod
printf '//go:build tools\npackage tools\n\nimport _ "k8s.io/kube-openapi/cmd/openapi-gen"\n' > tools.go
go build -mod=mod -o openapi-gen k8s.io/kube-openapi/cmd/openapi-gen

# Every package of the release and its staging modules that asks for OpenAPI definitions.
cache="$(go env GOMODCACHE)/k8s.io"
inputs="$(
  cd "$cache" &&
    grep -rl --include='*.go' '+k8s:openapi-gen=true' "kubernetes@v${version}" ./*@"${staging}" 2>/dev/null |
    grep -v '_test.go\|/testdata/\|/test/\|/examples\?/\|/vendor/\|/third_party/\|/cmd/' |
    xargs -n1 dirname | sort -u |
    sed -E "s#^kubernetes@v${version}#k8s.io/kubernetes#; s#^\./([a-z-]+)@${staging}#k8s.io/\1#" | paste -sd,
)"
# openapi-gen skips, without a word, a package whose module has no go.sum entry: record them all first.
go list -mod=mod -e ${inputs//,/ } > /dev/null
./openapi-gen --input-dirs "$inputs" \
  --output-package k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
  --go-header-file "$tree/hack/boilerplate/boilerplate.generatego.txt" \
  --output-base out --report-filename out/violations.report
cp out/k8s.io/kubernetes/pkg/generated/openapi/zz_generated.openapi.go "$tree/pkg/generated/openapi/"
definitions="$(grep -c '": *schema_' "$tree/pkg/generated/openapi/zz_generated.openapi.go" || true)"
if (( definitions < 1000 )); then
  echo "$tree: only $definitions OpenAPI definitions generated; expected thousands" >&2
  exit 1
fi
echo "$tree: v${version} with pkg/generated/openapi/zz_generated.openapi.go ($definitions definitions)"
