package blockmask

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A block-mask folder is written whole or not at all (issue 46 item 6):
// its .npy lists and block_mask.json, which says which mask they are for,
// must never disagree.
//
//   - A folder that does not exist is written as a temporary folder beside
//     it and renamed into place.
//   - In an existing folder, every file is first checked (a read-only or
//     non-regular one is refused before anything is written), then written
//     to a temporary file beside the file it replaces (beside a symlink's
//     target, so the link is kept), then renamed over it, the old file kept
//     under a backup name until the whole set is in place. block_mask.json
//     is moved aside first and put in place last, so even a crash halfway
//     leaves a folder with no block_mask.json, which fac does not take for a
//     recorded mask. On an error every file is put back as it was.
//
// A replaced file keeps its mode; its inode, and so its hard links, are new.

// rename is os.Rename; a variable so that tests can make a step fail.
var rename = os.Rename

// saveFile is one file of a save: its name in the folder and its bytes.
type saveFile struct {
	name string
	data []byte
}

// saveFiles writes files into dir by the rules above.
func saveFiles(dir string, files []saveFile) error {
	dir = filepath.Clean(dir) // "bm/" is the folder bm, beside which the new one is made
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = saveNewDir(dir, files)
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Made by someone else meanwhile: save into it.
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	return saveInto(dir, files)
}

// saveNewDir writes files into a temporary folder beside dir and renames
// it to dir. An error wrapping fs.ErrExist means dir appeared meanwhile.
func saveNewDir(dir string, files []saveFile) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	var tmp string
	for {
		tmp = filepath.Join(parent, "."+filepath.Base(dir)+".tmp-"+randomSuffix())
		err := os.Mkdir(tmp, 0o777) // less the umask, as MkdirAll's folder was
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	for _, f := range files {
		if err := writeNew(filepath.Join(tmp, f.name), f.data, 0o666); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Lstat(dir); serr == nil {
			return fmt.Errorf("%w: %w", fs.ErrExist, err)
		}
		return err
	}
	return nil
}

// slot is one file of a save into an existing folder.
type slot struct {
	saveFile
	path    string      // the file the name leads to (a symlink's target)
	old     fs.FileInfo // nil: there is none
	tmp     string      // the new bytes, staged
	backup  string      // the old file under a backup name, once it has one
	linked  bool        // backup is a hard link: the old file is also still at path until changed
	changed bool        // the new file is in place
}

// saveInto writes files into the existing folder dir; the last of files is
// block_mask.json, put in place last.
func saveInto(dir string, files []saveFile) (err error) {
	slots := make([]*slot, len(files))
	for i, f := range files {
		s, err := prepare(dir, f)
		if err != nil {
			return err
		}
		slots[i] = s
	}
	defer func() {
		for _, s := range slots {
			if s.tmp != "" {
				os.Remove(s.tmp)
			}
		}
	}()
	for _, s := range slots {
		mode := fs.FileMode(0o666) // less the umask, as a new file's
		if s.old != nil {
			mode = s.old.Mode().Perm()
		}
		tmp := filepath.Join(filepath.Dir(s.path), "."+filepath.Base(s.path)+".tmp-"+randomSuffix())
		if err := writeNew(tmp, s.data, mode); err != nil {
			return fmt.Errorf("%w (the folder is unchanged)", err)
		}
		s.tmp = tmp
		if s.old != nil {
			if err := os.Chmod(tmp, mode); err != nil { // the umask may have cut it
				return fmt.Errorf("%w (the folder is unchanged)", err)
			}
		}
	}
	// Commit: block_mask.json aside first, then each list, then the json.
	meta := slots[len(slots)-1]
	order := append([]*slot{meta}, slots[:len(slots)-1]...)
	defer func() {
		if err != nil {
			if rerr := rollback(order); rerr != nil {
				err = fmt.Errorf("%w; putting the old files back failed too, so the folder is incomplete (save it again): %w", err, rerr)
			} else {
				err = fmt.Errorf("%w (the folder is unchanged)", err)
			}
		}
	}()
	if meta.old != nil {
		if err := moveAside(meta); err != nil {
			return err
		}
	}
	for _, s := range order[1:] {
		if err := install(s); err != nil {
			return err
		}
	}
	if err := install(meta); err != nil {
		return err
	}
	for _, s := range slots {
		if s.backup != "" {
			os.Remove(s.backup)
		}
	}
	return nil
}

// prepare finds where f goes in dir and refuses, before anything is
// written, a file fac would not write by its output policy (see
// internal/outfile): one that is read-only or not a regular file.
func prepare(dir string, f saveFile) (*slot, error) {
	s := &slot{saveFile: f, path: filepath.Join(dir, f.name)}
	if li, err := os.Lstat(s.path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		p, err := filepath.EvalSymlinks(s.path)
		if err != nil {
			return nil, fmt.Errorf("%s: a symlink that leads nowhere: %w (nothing was written)", s.path, err)
		}
		s.path = p
	}
	fi, err := os.Lstat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (nothing was written)", s.path)
	case fi.Mode().Perm()&0o222 == 0:
		return nil, fmt.Errorf("%s is read-only: fac never replaces or chmods a read-only file (nothing was written)", filepath.Join(dir, f.name))
	}
	s.old = fi
	return s, nil
}

// moveAside renames s's old file to a backup name.
func moveAside(s *slot) error {
	b := filepath.Join(filepath.Dir(s.path), "."+filepath.Base(s.path)+".old-"+randomSuffix())
	if err := rename(s.path, b); err != nil {
		return err
	}
	s.backup = b
	return nil
}

// install puts s's staged file in place. An old file is first linked to
// a backup name, so the rename replaces it in one step; where hard links
// are not supported it is moved aside instead.
func install(s *slot) error {
	if s.old != nil && s.backup == "" {
		b := filepath.Join(filepath.Dir(s.path), "."+filepath.Base(s.path)+".old-"+randomSuffix())
		if err := os.Link(s.path, b); err != nil {
			if err := moveAside(s); err != nil {
				return err
			}
		} else {
			s.backup, s.linked = b, true
		}
	}
	if err := rename(s.tmp, s.path); err != nil {
		return err
	}
	s.tmp, s.changed = "", true
	return nil
}

// rollback puts back every old file of order that was replaced or moved
// aside, and removes new files that had none.
func rollback(order []*slot) error {
	var errs []error
	for i := len(order) - 1; i >= 0; i-- {
		s := order[i]
		switch {
		case s.linked && !s.changed: // the old file never left
			os.Remove(s.backup)
		case s.backup != "":
			if err := os.Rename(s.backup, s.path); err != nil {
				errs = append(errs, err)
			}
		case s.changed:
			if err := os.Remove(s.path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// writeNew writes data to a new file at path (created with mode less the
// umask) and syncs it.
func writeNew(path string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
		if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EINVAL) {
			err = nil // a file system without fsync
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
