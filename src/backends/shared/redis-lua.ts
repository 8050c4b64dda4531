// The Lua scripts of the Redis lock (one per operation, each run atomically by Redis), shared by
// the upstash and redis backends through redis-scripts.ts, which reads their replies. The key
// layout is described there.

// In the scripts, `n` is our nonce and its "|": a lock value that starts with it is ours. A
// completed fire's record (COMPLETE, for runOnce) is `|token|owner`: its nonce field is empty,
// which no nonce matches, so RENEW, RELEASE, RAISE and a retried acquire never touch it.

// KEYS lock1, fence1, lock2, fence2, ... (acquire: one pair); ARGV nonce, ttl (ms), owner. On
// each pair in order, stopping at the first grant: free, bump the fence, set the lock and return
// {1, token, index from 0}; already ours (a retried acquire), extend it and return {2, token,
// index}, the same token. One lock holding a completed fire's record: {3, its token, its owner}.
// All taken: {0, the smallest PTTL above 0 or -1, then for each lock in order its holder's token
// (0 for a value leasehold did not write)}: a reply of 2 + locks numbers (a record counts as taken).
// (An odd last key is not a lock: ACQUIRE_WAITING's writers set.) Several locks are read with one
// MGET (49 GETs took 90 µs more of Redis' time for the 50th of 50 permits, issue 29), and the free
// one found again with GET, which fails with WRONGTYPE on a key of another type where MGET
// answers nil: a key leasehold did not make is never overwritten. The holders' tokens and PTTLs
// are read only when all are taken.
export const ACQUIRE_ANY = `local n,r,k=ARGV[1].."|",{0,-1},{}
for i=1,#KEYS-#KEYS%2,2 do k[#k+1]=KEYS[i] end
local vs=#k<2 and {redis.call("GET",k[1])} or redis.call("MGET",unpack(k))
for j,v in ipairs(vs) do
local i=2*j-1
if not v and (#k<2 or not redis.call("GET",k[j])) then
local t=redis.call("INCR",KEYS[i+1])
redis.call("SET",KEYS[i],n..string.format("%d",t).."|"..ARGV[3],"PX",ARGV[2])
return {1,t,j-1}
end
if v:sub(1,#n)==n then
redis.call("PEXPIRE",KEYS[i],ARGV[2])
return {2,tonumber(v:match("^[^|]*|(%d+)|")),j-1}
end
end
for j,v in ipairs(vs) do
local t=tonumber(v:match("^[^|]*|(%d+)|"))
if #k<2 and t and v:sub(1,1)=="|" then return {3,t,v:match("^|%d+|(.*)$")} end
r[#r+1]=t or 0
local p=redis.call("PTTL",k[j])
if p>0 and (r[2]<0 or p<r[2]) then r[2]=p end
end
return r`;

// KEYS[1] lock; ARGV nonce, ttl. 1 when extended, 0 when the lock is not ours.
export const RENEW = `local n,v=ARGV[1].."|",redis.call("GET",KEYS[1])
if v and v:sub(1,#n)==n then return redis.call("PEXPIRE",KEYS[1],ARGV[2]) end
return 0`;

// Wake on release (docs/DESIGN.md §19): a script that frees KEYS[1] (RELEASE, COMPLETE, the last
// reader's RELEASE_SHARED) publishes on the channel `leasehold:` and the lock key, which waiters
// watching it subscribe to (redis backend). Always: PUBLISH with no subscriber costs Redis about a
// µs. pcall: a user without rights to the channel (Redis 7's ACL default) still frees the lock.
export const CHANNEL = "leasehold:";
const FREED = `redis.pcall("PUBLISH","${CHANNEL}"..KEYS[1],1)`;

// KEYS lock1, lock2, ...; ARGV nonce1, ttl1, nonce2, ttl2, ... RENEW on each lock: {1 or 0 per
// lock, in order}. (renewMany: the leases of many names, so no hash tag in common: never sent on a
// cluster.)
export const RENEW_MANY = `local r={}
for i=1,#KEYS do
local n,v=ARGV[2*i-1].."|",redis.call("GET",KEYS[i])
r[i]=v and v:sub(1,#n)==n and redis.call("PEXPIRE",KEYS[i],ARGV[2*i]) or 0
end
return r`;

// KEYS[1] lock; ARGV nonce. 1 when deleted (publishing the release), 0 when the lock is not ours.
export const RELEASE: string = `local n,v=ARGV[1].."|",redis.call("GET",KEYS[1])
if v and v:sub(1,#n)==n then ${FREED} return redis.call("DEL",KEYS[1]) end
return 0`;

// KEYS lock1, lock2, ...; ARGV nonce. RELEASE on each lock: deletes those that are ours (an
// unanswered ACQUIRE_ANY took at most one); the number deleted.
export const RELEASE_ANY = `local n,c=ARGV[1].."|",0
for i=1,#KEYS do
local v=redis.call("GET",KEYS[i])
if v and v:sub(1,#n)==n then c=c+redis.call("DEL",KEYS[i]) end
end
return c`;

// KEYS[1] lock, KEYS[2] fence; ARGV nonce, token. When the lock is ours: its value's token and
// the fence counter become at least the token (the expiry is kept); 1. Else 0. (c and o: the
// value's token and owner.)
export const RAISE = `local n,v=ARGV[1].."|",redis.call("GET",KEYS[1])
if not v or v:sub(1,#n)~=n then return 0 end
local t=tonumber(ARGV[2])
local c,o=v:match("^[^|]*|(%d+)|(.*)$")
if tonumber(c)<t then redis.call("SET",KEYS[1],n..ARGV[2].."|"..o,"KEEPTTL") end
if tonumber(redis.call("GET",KEYS[2]) or "0")<t then redis.call("SET",KEYS[2],ARGV[2]) end
return 1`;

// KEYS[1] lock; ARGV nonce, retain (ms). When the lock is ours: its value becomes the record of a
// completed fire, `|token|owner` (the nonce dropped), expiring after retain, and the standbys
// are told; 1. Else 0. The fence counter is untouched.
export const COMPLETE: string = `local n,v=ARGV[1].."|",redis.call("GET",KEYS[1])
if not v or v:sub(1,#n)~=n then return 0 end
redis.call("SET",KEYS[1],v:sub(#n),"PX",ARGV[2])
${FREED}
return 1`;

// Shared mode (docs/DESIGN.md §18). A lock held shared has the value `*|token|owner` (the newest
// reader's token and owner) with a PX expiry at the last reader's; no nonce is `*` (the backends
// refuse it), so the exclusive scripts count it as taken and never as theirs. Its readers are the
// sorted set `lock:readers` (member: nonce; score: when it expires, in ms of the server's TIME),
// and the writers waiting the sorted set `lock:writers` (member: waiter id; score: likewise).
// `now` is the server's TIME in ms, the clock of PX itself.
const NOW = `local c=redis.call("TIME")
local now=c[1]*1000+math.floor(c[2]/1000)`;

// Sets the expiry of KEYS[1] (the lock) and of the sorted set `z` to its greatest score, or deletes
// the lock (a shared one) when `z` is empty, publishing the release (only RELEASE_SHARED empties it).
const LAST = `local function last(z)
local top=redis.call("ZRANGE",z,-1,-1,"WITHSCORES")
if #top==0 then ${FREED} return redis.call("DEL",KEYS[1]) end
redis.call("PEXPIRE",KEYS[1],tonumber(top[2])-now)
redis.call("PEXPIRE",z,tonumber(top[2])-now)
end`;

// KEYS lock, fence, writers; ARGV nonce, ttl, owner, waiter. ACQUIRE_ANY on the one lock, then:
// granted, the waiter's mark goes; refused (not by a done record), the waiter is marked waiting
// for ttl. The reply is ACQUIRE_ANY's.
export const ACQUIRE_WAITING: string = `${NOW}
local r=(function()
${ACQUIRE_ANY}
end)()
if r[1]==1 or r[1]==2 then redis.call("ZREM",KEYS[3],ARGV[4])
elseif r[1]==0 then
redis.call("ZREMRANGEBYSCORE",KEYS[3],"-inf",now)
redis.call("ZADD",KEYS[3],now+ARGV[2],ARGV[4])
local top=redis.call("ZRANGE",KEYS[3],-1,-1,"WITHSCORES")
redis.call("PEXPIRE",KEYS[3],tonumber(top[2])-now)
end
return r`;

// KEYS lock, fence, readers, writers; ARGV nonce, ttl, owner. Held exclusive: ACQUIRE_ANY's
// refusal ({0, PTTL, token}) or done record ({3, token, owner}); a writer waiting: {0, -1, 0}.
// Else a new token, the reader added, the lock `*|token|owner` until the last reader's expiry:
// {1, token, 0}.
export const ACQUIRE_SHARED: string = `${NOW}
${LAST}
local v=redis.call("GET",KEYS[1])
if v and v:sub(1,2)~="*|" then
local t=tonumber(v:match("^[^|]*|(%d+)|"))
if t and v:sub(1,1)=="|" then return {3,t,v:match("^|%d+|(.*)$")} end
return {0,redis.call("PTTL",KEYS[1]),t or 0}
end
redis.call("ZREMRANGEBYSCORE",KEYS[4],"-inf",now)
if redis.call("ZCARD",KEYS[4])>0 then return {0,-1,0} end
redis.call("ZREMRANGEBYSCORE",KEYS[3],"-inf",now)
local t=redis.call("INCR",KEYS[2])
redis.call("ZADD",KEYS[3],now+ARGV[2],ARGV[1])
redis.call("SET",KEYS[1],"*|"..string.format("%d",t).."|"..ARGV[3])
last(KEYS[3])
return {1,t,0}`;

// KEYS lock, readers; ARGV nonce, ttl. 1 when the reader was live and now lasts ttl more, else 0.
export const RENEW_SHARED: string = `${NOW}
${LAST}
local s=redis.call("ZSCORE",KEYS[2],ARGV[1])
local v=redis.call("GET",KEYS[1])
if not s or tonumber(s)<=now or not v or v:sub(1,2)~="*|" then return 0 end
redis.call("ZADD",KEYS[2],now+ARGV[2],ARGV[1])
last(KEYS[2])
return 1`;

// KEYS lock, readers, writers; ARGV nonce (a reader's, or a waiting writer's id). Removes the
// writer's mark, or the reader, then expires the lock with the last reader left (deleted with none).
// 1 when a reader was removed, else 0.
export const RELEASE_SHARED: string = `${NOW}
${LAST}
redis.call("ZREM",KEYS[3],ARGV[1])
if redis.call("ZREM",KEYS[2],ARGV[1])==0 then return 0 end
redis.call("ZREMRANGEBYSCORE",KEYS[2],"-inf",now)
local v=redis.call("GET",KEYS[1])
if v and v:sub(1,2)=="*|" then last(KEYS[2]) end
return 1`;

// KEYS lock, fence, readers; ARGV nonce, token, owner. RAISE for a reader: when the nonce is a
// live reader of the lock held shared, the lock's token (the newest reader's, now this one) and
// the fence counter become at least the token (the expiry is kept); 1. Else 0.
export const RAISE_SHARED: string = `${NOW}
local s,v=redis.call("ZSCORE",KEYS[3],ARGV[1]),redis.call("GET",KEYS[1])
if not s or tonumber(s)<=now or not v or v:sub(1,2)~="*|" then return 0 end
local t=tonumber(ARGV[2])
if tonumber(v:match("^%*|(%d+)|"))<t then redis.call("SET",KEYS[1],"*|"..ARGV[2].."|"..ARGV[3],"KEEPTTL") end
if tonumber(redis.call("GET",KEYS[2]) or "0")<t then redis.call("SET",KEYS[2],ARGV[2]) end
return 1`;

// KEYS lock, readers. nil when free, else the value and its PTTL, and with a lock held shared
// (§18) how many readers are live. Read-only, without TIME (a read-only ACL refuses it): a lock
// held shared expires at its last reader's score (LAST), so the server's now is that score less
// the lock's PTTL. May run with EVAL_RO.
export const INSPECT = `local v=redis.call("GET",KEYS[1])
if not v then return nil end
local p=redis.call("PTTL",KEYS[1])
if v:sub(1,2)~="*|" then return {v,p} end
local top=redis.call("ZRANGE",KEYS[2],-1,-1,"WITHSCORES")
if #top==0 then return {v,p,0} end
return {v,p,redis.call("ZCOUNT",KEYS[2],"("..(tonumber(top[2])-p),"+inf")}`;
