//! Users, teams, memberships and tokens.

use super::{Db, DbError, DbResult, new_id, now_ms};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UserRow {
    pub id: String,
    pub username: String,
    pub password_hash: String,
    pub role_id: String,
    pub created_at: i64,
    /// 1 when disabled: no token works and login is refused.
    pub disabled: i64,
}

/// What [`Db::remove_member`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveMember {
    Removed,
    NotAMember,
    LastAdmin,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenRow {
    pub hash: String,
    pub kind: String,
    pub label: String,
    pub user_id: String,
    pub team_id: Option<String>,
    pub role_id: String,
    pub expire: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TeamRow {
    pub id: String,
    pub name: String,
    pub created_by: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MemberRow {
    pub user_id: String,
    pub username: String,
    pub role_id: String,
}

/// A team as one of a user's teams, with the user's role in it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UserTeamRow {
    pub id: String,
    pub name: String,
    pub role_id: String,
}

impl Db {
    pub async fn user_count(&self) -> DbResult<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await?;
        Ok(n)
    }

    /// Adds a user; `password_hash` is already an argon2 PHC string.
    /// Creates the first account, only while there is none: one statement, so that
    /// processes starting together on an empty database (replicas) race safely. Returns
    /// whether this call created it; `false` when any account exists (whoever made it).
    pub async fn insert_first_user(
        &self,
        username: &str,
        password_hash: &str,
        role_id: &str,
    ) -> DbResult<bool> {
        let done = sqlx::query(
            "INSERT INTO users (id, username, password_hash, role_id, created_at) \
             SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM users) \
             ON CONFLICT (username) DO NOTHING",
        )
        .bind(new_id())
        .bind(username)
        .bind(password_hash)
        .bind(role_id)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn insert_user(
        &self,
        username: &str,
        password_hash: &str,
        role_id: &str,
    ) -> DbResult<UserRow> {
        let row = UserRow {
            id: new_id(),
            username: username.to_owned(),
            password_hash: password_hash.to_owned(),
            role_id: role_id.to_owned(),
            created_at: now_ms(),
            disabled: 0,
        };
        sqlx::query("INSERT INTO users (id, username, password_hash, role_id, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(&row.id)
            .bind(&row.username)
            .bind(&row.password_hash)
            .bind(&row.role_id)
            .bind(row.created_at)
            .execute(&self.pool)
            .await
            .map_err(DbError::from_sqlx)?;
        Ok(row)
    }

    pub async fn user_by_name(&self, username: &str) -> DbResult<Option<UserRow>> {
        Ok(sqlx::query_as("SELECT id, username, password_hash, role_id, created_at, disabled FROM users WHERE username = $1")
            .bind(username)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// Every account, by name (administrators' user list).
    pub async fn list_users(&self) -> DbResult<Vec<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, username, password_hash, role_id, created_at, disabled FROM users ORDER BY username",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// The name of an owner id and whether it is a team: `Some((name, is_team))`.
    pub async fn owner_name(&self, id: &str) -> DbResult<Option<(String, bool)>> {
        if let Some(u) = self.user_by_id(id).await? {
            return Ok(Some((u.username, false)));
        }
        Ok(self.team_by_id(id).await?.map(|t| (t.name, true)))
    }

    pub async fn user_by_id(&self, id: &str) -> DbResult<Option<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, username, password_hash, role_id, created_at, disabled FROM users WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Stores a token by its hash; the token itself is never stored.
    pub async fn insert_token(&self, t: &TokenRow) -> DbResult<()> {
        sqlx::query("INSERT INTO tokens (hash, kind, label, user_id, team_id, role_id, expire, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(&t.hash)
            .bind(&t.kind)
            .bind(&t.label)
            .bind(&t.user_id)
            .bind(&t.team_id)
            .bind(&t.role_id)
            .bind(t.expire)
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(DbError::from_sqlx)?;
        Ok(())
    }

    pub async fn token_by_hash(&self, hash: &str) -> DbResult<Option<TokenRow>> {
        Ok(sqlx::query_as("SELECT hash, kind, label, user_id, team_id, role_id, expire FROM tokens WHERE hash = $1")
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn delete_token(&self, hash: &str) -> DbResult<()> {
        sqlx::query("DELETE FROM tokens WHERE hash = $1")
            .bind(hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Revokes every token of a user (all their sessions, user and team tokens alike).
    pub async fn delete_user_tokens(&self, user_id: &str) -> DbResult<u64> {
        Ok(sqlx::query("DELETE FROM tokens WHERE user_id = $1")
            .bind(user_id)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    /// Replaces an account's password hash and revokes its tokens but `keep` (the token
    /// hash of the request that changed its own password), in one transaction.
    pub async fn set_password(
        &self,
        user_id: &str,
        phc: &str,
        keep: Option<&str>,
    ) -> DbResult<bool> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
            .bind(phc)
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM tokens WHERE user_id = $1 AND hash <> $2")
            .bind(user_id)
            .bind(keep.unwrap_or(""))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(n == 1)
    }

    /// Disables or enables an account. Disabling also revokes all its tokens, in the same
    /// transaction, so no request authenticated by an old token runs after it.
    pub async fn set_user_disabled(&self, user_id: &str, disabled: bool) -> DbResult<bool> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("UPDATE users SET disabled = $1 WHERE id = $2")
            .bind(i64::from(disabled))
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if disabled {
            sqlx::query("DELETE FROM tokens WHERE user_id = $1")
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    }

    /// Starts a transaction that changes `team_id`'s membership, holding the team's row: on
    /// PostgreSQL a row lock, on SQLite the write lock from the first statement. Membership
    /// changes of one team are so serialised, and the "last teamAdmin" check below reads
    /// what the change will write over (two concurrent removals of the two last admins
    /// would otherwise each see the other one still there).
    async fn team_change(&self, team_id: &str) -> DbResult<sqlx::Transaction<'static, sqlx::Any>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE teams SET created_at = created_at WHERE id = $1")
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// Whether `user_id` is the only `teamAdmin` of `team_id`, within `tx`.
    async fn only_admin(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        team_id: &str,
        user_id: &str,
    ) -> DbResult<bool> {
        let admins: Vec<(String,)> = sqlx::query_as(
            "SELECT user_id FROM team_members WHERE team_id = $1 AND role_id = 'teamAdmin'",
        )
        .bind(team_id)
        .fetch_all(&mut **tx)
        .await?;
        Ok(admins.len() == 1 && admins[0].0 == user_id)
    }

    /// Removes a member from a team with the member's team tokens. Refuses to remove the
    /// team's last `teamAdmin`, which would leave the team unmanageable.
    pub async fn remove_member(&self, team_id: &str, user_id: &str) -> DbResult<RemoveMember> {
        let mut tx = self.team_change(team_id).await?;
        let role: Option<(String,)> =
            sqlx::query_as("SELECT role_id FROM team_members WHERE team_id = $1 AND user_id = $2")
                .bind(team_id)
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await?;
        if role.is_none() {
            return Ok(RemoveMember::NotAMember);
        }
        if Self::only_admin(&mut tx, team_id, user_id).await? {
            return Ok(RemoveMember::LastAdmin);
        }
        for sql in [
            "DELETE FROM team_members WHERE team_id = $1 AND user_id = $2",
            "DELETE FROM tokens WHERE team_id = $1 AND user_id = $2",
        ] {
            sqlx::query(sql)
                .bind(team_id)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(RemoveMember::Removed)
    }

    /// Creates a team with `creator` as its first member, in `role_id`.
    pub async fn insert_team(&self, name: &str, creator: &str, role_id: &str) -> DbResult<TeamRow> {
        let row = TeamRow {
            id: new_id(),
            name: name.to_owned(),
            created_by: creator.to_owned(),
            created_at: now_ms(),
        };
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO teams (id, name, created_by, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&row.id)
            .bind(&row.name)
            .bind(&row.created_by)
            .bind(row.created_at)
            .execute(&mut *tx)
            .await
            .map_err(DbError::from_sqlx)?;
        sqlx::query("INSERT INTO team_members (team_id, user_id, role_id) VALUES ($1, $2, $3)")
            .bind(&row.id)
            .bind(creator)
            .bind(role_id)
            .execute(&mut *tx)
            .await
            .map_err(DbError::from_sqlx)?;
        tx.commit().await?;
        Ok(row)
    }

    /// The account name of an owner (a user's name or a team's; empty when neither), as
    /// an NL Studio `nluId` spells it (`<account>:<nlu name>`).
    pub async fn account_name(&self, owner_id: &str) -> DbResult<String> {
        if let Some(u) = self.user_by_id(owner_id).await? {
            return Ok(u.username);
        }
        Ok(self
            .team_by_id(owner_id)
            .await?
            .map(|t| t.name)
            .unwrap_or_default())
    }

    pub async fn team_by_id(&self, id: &str) -> DbResult<Option<TeamRow>> {
        Ok(
            sqlx::query_as("SELECT id, name, created_by, created_at FROM teams WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    pub async fn team_by_name(&self, name: &str) -> DbResult<Option<TeamRow>> {
        Ok(
            sqlx::query_as("SELECT id, name, created_by, created_at FROM teams WHERE name = $1")
                .bind(name)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    pub async fn team_members(&self, team_id: &str) -> DbResult<Vec<MemberRow>> {
        Ok(sqlx::query_as(
            "SELECT m.user_id AS user_id, u.username AS username, m.role_id AS role_id \
             FROM team_members m JOIN users u ON u.id = m.user_id WHERE m.team_id = $1 ORDER BY u.username",
        )
        .bind(team_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The user's role in a team, if a member.
    pub async fn membership(&self, team_id: &str, user_id: &str) -> DbResult<Option<String>> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT role_id FROM team_members WHERE team_id = $1 AND user_id = $2")
                .bind(team_id)
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|r| r.0))
    }

    /// Adds a member, or changes the role of an existing one.
    /// Gives `user_id` the role `role_id` in `team_id` (adding it as a member if needed).
    /// Refuses (false) to demote the team's last `teamAdmin`.
    pub async fn set_member(&self, team_id: &str, user_id: &str, role_id: &str) -> DbResult<bool> {
        let mut tx = self.team_change(team_id).await?;
        if role_id != "teamAdmin" && Self::only_admin(&mut tx, team_id, user_id).await? {
            return Ok(false);
        }
        sqlx::query("DELETE FROM team_members WHERE team_id = $1 AND user_id = $2")
            .bind(team_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO team_members (team_id, user_id, role_id) VALUES ($1, $2, $3)")
            .bind(team_id)
            .bind(user_id)
            .bind(role_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn user_teams(&self, user_id: &str) -> DbResult<Vec<UserTeamRow>> {
        Ok(sqlx::query_as(
            "SELECT t.id AS id, t.name AS name, m.role_id AS role_id FROM team_members m \
             JOIN teams t ON t.id = m.team_id WHERE m.user_id = $1 ORDER BY t.name",
        )
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Deletes a team, its memberships and its team tokens. Projects must be gone first.
    pub async fn delete_team(&self, team_id: &str) -> DbResult<()> {
        let mut tx = self.pool.begin().await?;
        for sql in [
            "DELETE FROM team_members WHERE team_id = $1",
            "DELETE FROM tokens WHERE team_id = $1",
            "DELETE FROM teams WHERE id = $1",
        ] {
            sqlx::query(sql).bind(team_id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
