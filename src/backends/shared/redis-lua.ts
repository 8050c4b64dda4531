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
export const ACQUIRE_ANY = `local n,r=ARGV[1].."|",{0,-1}
for i=1,#KEYS,2 do
local v=redis.call("GET",KEYS[i])
if not v then
local t=redis.call("INCR",KEYS[i+1])
redis.call("SET",KEYS[i],n..string.format("%d",t).."|"..ARGV[3],"PX",ARGV[2])
return {1,t,(i-1)/2}
end
local t=tonumber(v:match("^[^|]*|(%d+)|"))
if #KEYS==2 and t and v:sub(1,1)=="|" then return {3,t,v:match("^|%d+|(.*)$")} end
if v:sub(1,#n)==n then
redis.call("PEXPIRE",KEYS[i],ARGV[2])
return {2,t,(i-1)/2}
end
local p=redis.call("PTTL",KEYS[i])
if p>0 and (r[2]<0 or p<r[2]) then r[2]=p end
r[#r+1]=t or 0
end
return r`;

// KEYS[1] lock; ARGV nonce, ttl. 1 when extended, 0 when the lock is not ours.
export const RENEW = `local n,v=ARGV[1].."|",redis.call("GET",KEYS[1])
if v and v:sub(1,#n)==n then return redis.call("PEXPIRE",KEYS[1],ARGV[2]) end
return 0`;

// KEYS[1] lock; ARGV nonce. 1 when deleted, 0 when the lock is not ours.
export const RELEASE = `local n,v=ARGV[1].."|",redis.call("GET",KEYS[1])
if v and v:sub(1,#n)==n then return redis.call("DEL",KEYS[1]) end
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
// completed fire, `|token|owner` (the nonce dropped), expiring after retain; 1. Else 0. The fence
// counter is untouched.
export const COMPLETE = `local n,v=ARGV[1].."|",redis.call("GET",KEYS[1])
if not v or v:sub(1,#n)~=n then return 0 end
redis.call("SET",KEYS[1],v:sub(#n),"PX",ARGV[2])
return 1`;

// KEYS[1] lock. nil when free, else the value and its PTTL. Read-only: may run with EVAL_RO.
export const INSPECT = `local v=redis.call("GET",KEYS[1])
if not v then return nil end
return {v,redis.call("PTTL",KEYS[1])}`;
