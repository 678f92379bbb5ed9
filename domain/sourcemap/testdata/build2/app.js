
!function(){try{var e="undefined"!=typeof window?window:"undefined"!=typeof global?global:"undefined"!=typeof globalThis?globalThis:"undefined"!=typeof self?self:{},n=(new e.Error).stack;n&&(e._sentryDebugIds=e._sentryDebugIds||{},e._sentryDebugIds[n]="43785377-708c-597d-8161-593481e684c9")}catch(e){}}();
(()=>{function n(t){return(t/100).toFixed(2)}function i(t){let r=0;for(let o of t.items)r+=o.price*o.qty;return r}function e(t){let r=i(t);return"Total: "+n(r)}function c(t){let r=t.carts[t.current];return e(r)}globalThis.shop={checkout:c};function a(t,r,o){return[t,r,o].filter(Boolean).join(" \xB7 ")}globalThis.banner=a;})();
//# sourceMappingURL=app.js.map

//# debugId=43785377-708c-597d-8161-593481e684c9
