package oncekey

// `go get` of the module path the README gives: the module is served from a local file GOPROXY
// (the layout proxy.golang.org serves for a tag client/go/vX.Y.Z of the repository), and a new
// module outside the repository fetches it by that path, imports the package without an alias and
// builds.

import (
	"archive/zip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// modulePath is the path `go get` resolves from github.com/oncekey/oncekey/client/go.
const modulePath = "github.com/oncekey/oncekey/client/go"

func TestGoGetByModulePathBuilds(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	const version = "v0.0.1"
	proxy := t.TempDir()
	writeProxyModule(t, proxy, root, version)

	dir := t.TempDir()
	code := `package main

import (
	"fmt"

	"github.com/oncekey/oncekey/client/go/oncekey"
)

func main() { fmt.Println(oncekey.Key("email.send", "ticket-481", "v1").Key()) }
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"GOPROXY=file://" + filepath.ToSlash(proxy), "GOSUMDB=off", "GOWORK=off", "GOFLAGS=-mod=mod"}
	goCmdEnv(t, dir, env, "mod", "init", "example.com/goget")
	goCmdEnv(t, dir, env, "get", modulePath+"@"+version)
	if got := goCmdEnv(t, dir, env, "run", "."); got != "ticket-481:v1\n" {
		t.Fatalf("the module fetched by go get printed %q", got)
	}
}

// writeProxyModule lays out module version of the module in root under a GOPROXY directory: the
// version list, .info, .mod and the module zip (every file of the module, without nested modules).
func writeProxyModule(t *testing.T, proxy, root, version string) {
	t.Helper()
	at := filepath.Join(proxy, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	for name, content := range map[string][]byte{
		"list": []byte(version + "\n"), version + ".info": []byte(info), version + ".mod": mod,
	} {
		if err := os.WriteFile(filepath.Join(at, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	zw := zip.NewWriter(out)
	prefix := modulePath + "@" + version + "/"
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // a nested module (tools) is not part of this one
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		w, err := zw.Create(prefix + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
