package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/desk-runtime/desk"
)

func (s *DB) CreateLoginLink(ctx context.Context, codeHash, tokenHash string, createdAt, expires time.Time, keep int) error {
	if codeHash == "" || tokenHash == "" {
		return desk.Errorf(desk.EINVALID, "a login link needs a code hash and a token hash")
	}
	if keep < 1 {
		keep = 1
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `DELETE FROM login_links WHERE expires_at <= ?`, micros(createdAt)); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO login_links (code_hash, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?)`,
			codeHash, tokenHash, micros(createdAt), micros(expires)); err != nil {
			return s.conflict(err, "login link exists")
		}
		// The bound: only the newest keep codes stay live.
		_, err := s.exec(ctx, tx, `DELETE FROM login_links WHERE code_hash NOT IN
			(SELECT code_hash FROM login_links ORDER BY created_at DESC, code_hash LIMIT ?)`, keep)
		return err
	})
}

func (s *DB) RedeemLoginLink(ctx context.Context, codeHash string, now time.Time) (string, error) {
	// One statement deletes and answers: of two nodes redeeming the same
	// code, the second finds no row whatever the interleaving.
	var tokenHash string
	err := s.queryRow(ctx, s.db, `DELETE FROM login_links WHERE code_hash = ? AND expires_at > ? RETURNING token_hash`,
		codeHash, micros(now)).Scan(&tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", desk.Errorf(desk.ENOTFOUND, "login link used, expired or unknown")
	}
	return tokenHash, err
}
