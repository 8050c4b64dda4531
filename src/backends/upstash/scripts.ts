// The upstash backend's Lua scripts (one per operation, each run atomically by Redis) and the
// lock value they store: `nonce|token|owner`.

// KEYS[1] lock, KEYS[2] fence; ARGV nonce, ttl (ms), owner.
// Free: bump the fence, set the lock and return {1, token}. Already ours (a retried acquire):
// extend and return {2, token}, the same token. Taken: return the holder's value and PTTL.
export const ACQUIRE = `local v=redis.call("GET",KEYS[1])
if v then
if string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|" then
redis.call("PEXPIRE",KEYS[1],ARGV[2])
return {2,tonumber(string.match(v,"^[^|]*|(%d+)|"))}
end
return {0,v,redis.call("PTTL",KEYS[1])}
end
local t=redis.call("INCR",KEYS[2])
redis.call("SET",KEYS[1],ARGV[1].."|"..string.format("%d",t).."|"..ARGV[3],"PX",ARGV[2])
return {1,t}`;

// KEYS[1] lock; ARGV nonce, ttl. 1 when extended, 0 when the lock is not ours.
export const RENEW = `local v=redis.call("GET",KEYS[1])
if v and string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|" then return redis.call("PEXPIRE",KEYS[1],ARGV[2]) end
return 0`;

// KEYS[1] lock; ARGV nonce. 1 when deleted, 0 when the lock is not ours.
export const RELEASE = `local v=redis.call("GET",KEYS[1])
if v and string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|" then return redis.call("DEL",KEYS[1]) end
return 0`;

// KEYS[1] lock, KEYS[2] fence; ARGV nonce, token. When the lock is ours: its value's token and
// the fence counter become at least the token (the expiry is kept); 1. Else 0.
export const RAISE = `local v=redis.call("GET",KEYS[1])
if not (v and string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|") then return 0 end
local t=tonumber(ARGV[2])
local n,o=string.match(v,"^[^|]*|(%d+)|(.*)$")
if tonumber(n)<t then redis.call("SET",KEYS[1],ARGV[1].."|"..ARGV[2].."|"..o,"KEEPTTL") end
if tonumber(redis.call("GET",KEYS[2]) or "0")<t then redis.call("SET",KEYS[2],ARGV[2]) end
return 1`;

// KEYS[1] lock. nil when free, else the value and its PTTL. Read-only: run with EVAL_RO.
export const INSPECT = `local v=redis.call("GET",KEYS[1])
if not v then return nil end
return {v,redis.call("PTTL",KEYS[1])}`;

export function parseValue(value: string): { owner: string; token: number } | null {
  const m = /^[^|]*\|(\d+)\|/.exec(value);
  const token = m ? Number(m[1]) : Number.NaN;
  return m && Number.isSafeInteger(token) ? { owner: value.slice(m[0].length), token } : null;
}

/** How many lock names a backend remembers the highest token of (least recently seen dropped). */
