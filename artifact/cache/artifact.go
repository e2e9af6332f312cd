package cache

import (
	"errors"

	"github.com/fac-compiler/fac/artifact"
)

// Artifact returns the artifact of identity id from the cache, building and
// storing it on a miss. An entry that does not decode to a valid artifact
// of exactly that identity is corrupt: removed and rebuilt, with one build
// per key even across processes.
func (c *Cache) Artifact(id artifact.Ident, build func() (*artifact.Artifact, error)) (*artifact.Artifact, Status, error) {
	key := NewKey("artifact", id.Key())
	var built, hit *artifact.Artifact
	payload, status, err := c.GetOrBuildChecked(key, "artifact "+id.String(), func() ([]byte, error) {
		a, err := build()
		if err != nil {
			return nil, err
		}
		built = a
		return a.Encode()
	}, func(b []byte) error {
		a, err := artifact.Decode(b)
		if err == nil && a.Ident.Key() != id.Key() {
			err = errors.New("cache entry holds an artifact of another identity")
		}
		hit = a
		return err
	})
	if payload == nil {
		return nil, status, err
	}
	// A payload with an ErrStore error was warned about: use it.
	if built != nil {
		return built, status, nil
	}
	if hit == nil {
		if hit, err = artifact.Decode(payload); err != nil {
			return nil, Corrupt, err
		}
	}
	return hit, status, nil
}
